import { dirname } from 'node:path';

/** What each error code means for the folder being written, and what the user can do about it. */
const FOLDER_PROBLEMS: Record<string, string> = {
  ENOSPC: 'is full',
  EDQUOT: 'is over its disk quota',
  EROFS: 'is on a read-only file system',
  EACCES: 'is not writable by this user',
  EPERM: 'is not writable by this user',
};

/**
 * A file that could not be written or put in place. `folder` is the folder that refused it (full, read-only, not
 * writable), `path` the file; the message says both and what to do. Nothing half-written is left under `path`.
 */
export class AtomicWriteError extends Error {
  readonly code: string;

  constructor(
    readonly path: string,
    readonly folder: string,
    code: string | undefined,
    cause: unknown,
  ) {
    const problem = code === undefined ? undefined : FOLDER_PROBLEMS[code];
    super(
      problem
        ? `cannot write ${path}: the folder ${folder} ${problem} (${code}); ${code === 'ENOSPC' || code === 'EDQUOT' ? 'free space there' : 'make it writable'} or write to another folder`
        : `cannot write ${path}: ${(cause as Error | undefined)?.message ?? String(cause)}`,
      { cause },
    );
    this.name = 'AtomicWriteError';
    this.code = code ?? 'EIO';
  }
}

/** `err`, met while writing `path` (a file in `folder`), as an {@link AtomicWriteError} (one already is kept). */
export function asWriteError(err: unknown, path: string, folder = dirname(path)): AtomicWriteError {
  if (err instanceof AtomicWriteError) return err;
  const code = (err as { code?: unknown } | undefined)?.code;
  return new AtomicWriteError(path, folder, typeof code === 'string' ? code : undefined, err);
}
