import { closeSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { makeFolder } from '@flexhelm/atomic-write';
import { InputError } from './usage-error.js';

/**
 * Makes `folder` (and its parents) and proves a file can be created in it, so that a read-only or full output folder
 * is reported before any work starts, not when the first run's files are written. `what` names the folder in the
 * message, `flag` the option that changes it.
 */
export function checkWritableFolder(folder: string, what: string, flag: string): void {
  const probe = join(folder, `.flexhelm-write-check-${process.pid}`);
  try {
    makeFolder(folder);
    closeSync(openSync(probe, 'w'));
    rmSync(probe, { force: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new InputError(`the ${what} ${folder} cannot be written (${code}): make it writable or give ${flag} a writable folder`);
  }
}
