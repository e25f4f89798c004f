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

/** Writes `data` to the new file `tmp` and syncs it (the async {@link writeTempFile}); errors name `path`'s folder. */
async function writeTempFileAsync(tmp: string, path: string, data: FileData): Promise<void> {
  try {
    const handle = await open(tmp, 'wx');
    try {
      await handle.writeFile(data); // loops over short writes
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    throw asWriteError(err, path);
  }
}

/**
 * {@link writeFilesAtomic} off the event loop: the writes, syncs and renames run in libuv's thread pool, so a server
 * keeps answering while a job's run files (five files, six fsyncs: tens of milliseconds on a virtual disk) go to
 * disk. Same guarantees: every temporary file is written and synced before the first rename, so a full or read-only
 * folder leaves none of them; each path is the old file or the new one, never part of one; no temporary file
 * outlives a failure, and the error names the folder that refused.
 */
export async function writeFilesAtomicAsync(files: readonly (readonly [path: string, data: FileData])[]): Promise<void> {
  const temps: { tmp: string; path: string }[] = [];
  try {
    for (const [path, data] of files) {
      makeFolder(dirname(path), path);
      const tmp = tempPathFor(path);
      temps.push({ tmp, path });
      await writeTempFileAsync(tmp, path, data);
    }
    const folders = new Set<string>();
    for (const { tmp, path } of temps) {
      try {
        await rename(tmp, path);
      } catch (err) {
        throw asWriteError(err, path);
      }
      folders.add(dirname(path));
    }
    for (const folder of folders) await syncFolderAsync(folder);
  } catch (err) {
    for (const { tmp } of temps) await rm(tmp, { force: true });
    throw asWriteError(err, files[0]?.[0] ?? '.');
  }
}

/** {@link writeFileAtomic} off the event loop (one file of {@link writeFilesAtomicAsync}). */
export function writeFileAtomicAsync(path: string, data: FileData): Promise<void> {
  return writeFilesAtomicAsync([[path, data]]);
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
