/**
 * Archive and compression formats flexhelm can unpack. `tar.gz`/`tgz`/`tar` unpack into a folder; `zip` too; `gz` and
 * `zst` decompress one file.
 */
export const ARCHIVE_FORMATS = ['tar.gz', 'tgz', 'tar', 'zip', 'gz', 'zst'] as const;
export type ArchiveFormat = (typeof ARCHIVE_FORMATS)[number];

/** The archive format a URL's file name ends with (query and fragment ignored), or undefined for a plain file. */
export function inferArchiveFormat(url: string): ArchiveFormat | undefined {
  let path = url;
  try {
    path = new URL(url).pathname;
  } catch {
    path = url.replace(/[?#].*$/, '');
  }
  const lower = path.toLowerCase();
  return ARCHIVE_FORMATS.find((format) => lower.endsWith(`.${format}`));
}

export function isArchiveFormat(value: string): value is ArchiveFormat {
  return (ARCHIVE_FORMATS as readonly string[]).includes(value);
}
