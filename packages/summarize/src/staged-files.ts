import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Files written all or nothing: each `stage` writes a temporary sibling (fsynced); `commit` renames them all into
 * place; `abort` removes the temporaries. A summarize that fails half-way (a bad run found late, a full disk) leaves
 * the previous summary files as they were.
 */
export class StagedFiles {
  private readonly staged: { tmp: string; path: string }[] = [];
  private readonly createdDirs: string[] = [];

  stage(path: string, text: string): void {
    const created = mkdirSync(dirname(path), { recursive: true });
    if (created) this.createdDirs.push(created);
    const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.staged.push({ tmp, path });
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  get size(): number {
    return this.staged.length;
  }

  commit(): void {
    for (const { tmp, path } of this.staged) renameSync(tmp, path);
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
