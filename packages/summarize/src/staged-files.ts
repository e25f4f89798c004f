import { existsSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { makeFolder, renameIntoPlace, tempPathFor, writeTempFile } from '@flexhelm/atomic-write';

/**
 * Files written all or nothing: each `stage` writes a temporary sibling (fsynced); `commit` renames them all into
 * place and syncs their folders; `abort` removes the temporaries. A summarize that fails half-way (a bad run found
 * late, a full disk) leaves the previous summary files as they were. Errors name the folder that refused.
 */
export class StagedFiles {
  private readonly staged: { tmp: string; path: string }[] = [];
  private readonly createdDirs: string[] = [];

  stage(path: string, text: string): void {
    const folder = dirname(path);
    const missing: string[] = [];
    for (let f = folder; dirname(f) !== f && !existsSync(f); f = dirname(f)) missing.unshift(f);
    makeFolder(folder, path);
    if (missing[0]) this.createdDirs.push(missing[0]);
    const tmp = tempPathFor(path);
    this.staged.push({ tmp, path });
    writeTempFile(tmp, path, text);
  }

  get size(): number {
    return this.staged.length;
  }

  commit(): void {
    renameIntoPlace(this.staged);
    this.staged.length = 0;
    this.createdDirs.length = 0;
  }

  abort(): void {
    for (const { tmp } of this.staged) rmSync(tmp, { force: true });
    // Folders made for the staged files hold nothing else of ours: remove them too (newest first).
    for (const dir of this.createdDirs.reverse()) rmSync(dir, { recursive: true, force: true });
    this.staged.length = 0;
    this.createdDirs.length = 0;
  }
}
