import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { asWriteError } from './atomic-write-error.js';
import { makeFolder } from './make-folder.js';
import { tempPathFor, type FileData } from './write-file-atomic.js';

async function syncFolderAsync(folder: string): Promise<void> {
  const handle = await open(folder, 'r');
  try {
    await handle.sync();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
  } finally {
    await handle.close();
  }
}

/**
 * {@link writeFileAtomic} off the event loop: the writes, syncs and renames run in libuv's thread pool, so a server
 * keeps answering while a large file goes to a slow disk. Same guarantees: `path` is the old file or the new one,
 * never part of one; no temporary file outlives a failure.
 */
export async function writeFileAtomicAsync(path: string, data: FileData): Promise<void> {
  const folder = dirname(path);
  makeFolder(folder, path);
  const tmp = tempPathFor(path);
  try {
    const handle = await open(tmp, 'wx');
    try {
      await handle.writeFile(data); // loops over short writes
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
    await syncFolderAsync(folder);
  } catch (err) {
    await rm(tmp, { force: true });
    throw asWriteError(err, path);
  }
}

/** {@link commitTempFile} off the event loop. */
export async function commitTempFileAsync(tmp: string, path: string): Promise<void> {
  try {
    const handle = await open(tmp, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
    await syncFolderAsync(dirname(path));
  } catch (err) {
    await rm(tmp, { force: true });
    throw asWriteError(err, path);
  }
}
