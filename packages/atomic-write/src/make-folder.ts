import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { asWriteError } from './atomic-write-error.js';

/**
 * Makes `folder` one level at a time: a recursive mkdir under a read-only folder reports ENOENT, hiding the cause
 * (EROFS, EACCES) and which folder refused. `forPath` is the file the folder is made for (named in the error).
 */
export function makeFolder(folder: string, forPath: string = folder): void {
  const missing: string[] = [];
  for (let f = folder; !existsSync(f) && dirname(f) !== f; f = dirname(f)) missing.unshift(f);
  for (const f of missing) {
    try {
      mkdirSync(f);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue; // made meanwhile by another process
      throw asWriteError(err, forPath, dirname(f));
    }
  }
}
