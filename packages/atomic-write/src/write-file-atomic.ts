import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { asWriteError } from './atomic-write-error.js';
import { makeFolder } from './make-folder.js';

/** File contents: text (written as UTF-8) or bytes. */
export type FileData = string | Uint8Array;

/** A fresh temporary name beside `path` (same folder, so same file system: the final rename is atomic). */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
}

/** Whether `name` (a file name, not a path) is one of {@link tempPathFor}'s: left only by a process killed mid-write. */
export function isTempName(name: string): boolean {
  return /^\..+\.tmp-\d+-[0-9a-f]{8}$/.test(name);
}

/**
 * Writes all of `bytes` at the file's position. One write(2) may write less than asked (a file system filling up
 * writes what fits and reports the error only on the next call) or at most ~2 GiB: loop until all is written.
 */
export function writeAll(fd: number, data: FileData): void {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, Math.min(bytes.length - done, 1 << 30));
}

/**
 * Makes the folder's entries (a rename into it) durable. File systems that cannot sync a folder (EINVAL) have
 * nothing more to do.
 */
export function syncFolder(folder: string): void {
  const fd = openSync(folder, 'r');
  try {
    fsyncSync(fd);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
  } finally {
    closeSync(fd);
  }
}

/** Creates `tmp` (which must not exist), lets `fill` write it through its descriptor, and syncs it to disk. */
function fillNewFile(tmp: string, fill: (fd: number) => void): void {
  const fd = openSync(tmp, 'wx');
  try {
    fill(fd);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes `data` to the temporary file `tmp` (a fresh {@link tempPathFor} name beside `path`) and syncs it: the first
 * half of an all-or-nothing write whose renames come later ({@link renameIntoPlace}). Errors name `path`'s folder.
 */
export function writeTempFile(tmp: string, path: string, data: FileData): void {
  try {
    fillNewFile(tmp, (fd) => writeAll(fd, data));
  } catch (err) {
    throw asWriteError(err, path);
  }
}

/** Renames each written temporary file onto its path, then syncs each folder once: the second half. */
export function renameIntoPlace(files: readonly { tmp: string; path: string }[]): void {
  const folders = new Set<string>();
  for (const { tmp, path } of files) {
    try {
      renameSync(tmp, path);
    } catch (err) {
      throw asWriteError(err, path);
    }
    folders.add(dirname(path));
  }
  for (const folder of folders) syncFolder(folder);
}

/**
 * Writes `path` all or nothing: a temporary file in the same folder is filled by `fill` (given its descriptor;
 * use {@link writeAll}), synced to disk, renamed onto `path`, and the folder synced. On any failure the temporary
 * file is removed and `path` is as it was; the error is an {@link AtomicWriteError} naming the folder that refused.
 * The folder (and its parents) is made when missing.
 */
export function writeFileAtomicWith(path: string, fill: (fd: number) => void): void {
  const folder = dirname(path);
  makeFolder(folder, path);
  const tmp = tempPathFor(path);
  try {
    fillNewFile(tmp, fill);
    renameSync(tmp, path);
    syncFolder(folder);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw asWriteError(err, path);
  }
}

/** Writes `data` to `path` all or nothing (see {@link writeFileAtomicWith}). */
export function writeFileAtomic(path: string, data: FileData): void {
  writeFileAtomicWith(path, (fd) => writeAll(fd, data));
}

/**
 * Puts a file written elsewhere under a temporary name (a streamed download, an unpacked archive member) in place:
 * syncs it, renames it onto `path` (same folder) and syncs the folder. On failure the temporary file is removed.
 */
export function commitTempFile(tmp: string, path: string): void {
  try {
    const fd = openSync(tmp, 'r+');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
    syncFolder(dirname(path));
  } catch (err) {
    rmSync(tmp, { force: true });
    throw asWriteError(err, path);
  }
}

/**
 * Writes several files all or nothing as far as a file system allows: every temporary file is written and synced
 * first, so a full or read-only folder leaves none of them; then each is renamed into place and the folders synced.
 */
export function writeFilesAtomic(files: readonly (readonly [path: string, data: FileData])[]): void {
  const temps: { tmp: string; path: string }[] = [];
  try {
    for (const [path, data] of files) {
      makeFolder(dirname(path), path);
      const tmp = tempPathFor(path);
      temps.push({ tmp, path });
      writeTempFile(tmp, path, data);
    }
    renameIntoPlace(temps);
  } catch (err) {
    for (const { tmp } of temps) rmSync(tmp, { force: true });
    throw asWriteError(err, files[0]?.[0] ?? '.');
  }
}
