import { closeSync, fsyncSync, openSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { asWriteError } from './atomic-write-error.js';
import { makeFolder } from './make-folder.js';
import { syncFolder } from './write-file-atomic.js';

function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function syncTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) syncTree(path);
    else if (entry.isFile()) syncFile(path);
  }
  syncFolder(dir);
}

/**
 * Puts a folder (a model: config, tokenizer, weights; an unpacked archive) or a file built under a temporary name in
 * place all or nothing: everything in it is synced, it is renamed onto `target` (a folder must not exist there) and
 * the parent folder synced. On failure the temporary is removed and the error names the folder that refused.
 */
export function commitTree(tmp: string, target: string): void {
  try {
    if (statSync(tmp).isDirectory()) syncTree(tmp);
    else syncFile(tmp);
    makeFolder(dirname(target), target);
    renameSync(tmp, target);
    syncFolder(dirname(target));
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw asWriteError(err, target, dirname(target));
  }
}
