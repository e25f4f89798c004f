import { getSystemErrorMap } from 'node:util';

/** A failed readFile/writeFile: says which file, which system call, where, and why. */
export class PinnedIoError extends Error {
  readonly code: string;
  readonly errno: number | undefined;
  readonly syscall: string;
  readonly path: string;
  readonly offset: number;

  constructor(message: string, fields: { code: string; errno?: number; syscall: string; path: string; offset: number }) {
    super(message);
    this.name = 'PinnedIoError';
    this.code = fields.code;
    this.errno = fields.errno;
    this.syscall = fields.syscall;
    this.path = fields.path;
    this.offset = fields.offset;
  }
}

/** Builds the error for a failed system call; errno is positive (C) or negative (libuv), either works. */
export function systemIoError(operation: string, path: string, syscall: string, offset: number, errno: number): PinnedIoError {
  const entry = getSystemErrorMap().get(-Math.abs(errno));
  const [code, description] = entry ?? [`E${Math.abs(errno)}`, `system error ${Math.abs(errno)}`];
  return new PinnedIoError(`${operation} ${path}: ${syscall} failed at byte ${offset}: ${description} (${code})`, {
    code,
    errno: -Math.abs(errno),
    syscall,
    path,
    offset,
  });
}

/** The file ends before the requested range does. */
export function shortFileError(path: string, offset: number, requested: number, fileSize: number): PinnedIoError {
  const available = Math.max(0, fileSize - offset);
  return new PinnedIoError(
    `readFile ${path}: only ${available} of the ${requested} bytes requested at offset ${offset} exist (the file ends at byte ${fileSize}); ` +
      'pass a smaller buffer or { allowShort: true } to accept a partial read',
    { code: 'ERR_SHORT_READ', syscall: 'read', path, offset },
  );
}
