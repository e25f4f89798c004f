import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat, unlink } from 'node:fs/promises';
import { commitTempFileAsync, commitTree } from '@flexhelm/atomic-write';
import { basename, dirname, isAbsolute, join, normalize, resolve } from 'node:path';
import { type ArchiveFormat, inferArchiveFormat, isArchiveFormat } from './archive-format.js';
import { DownloadError } from './download-error.js';
import { withFileLock } from './file-lock.js';
import { downloadToPartialFile } from './http-download.js';
import { unpackArchive } from './unpack-archive.js';
import { rewriteUrl, urlRewritesFromEnv, type UrlRewrites } from './url-rewrites.js';

/** Progress of one {@link ensureFileDownloaded} call, for progress bars. */
export interface DownloadProgress {
  phase: 'download' | 'unpack';
  url: string;
  targetPath: string;
  bytesDone: number;
  /** Unknown when the server sends no length. */
  bytesTotal: number | undefined;
}

export interface EnsureFileDownloadedOptions {
  url: string;
  /** Where the file (or, for archives, the unpacked folder or file) ends up. */
  targetPath: string;
  /**
   * Unpack the download: a format, or `'auto'` to infer it from the URL's file name. Without it the file is stored as
   * downloaded.
   */
  unpack?: ArchiveFormat | 'auto';
  /**
   * The entry of the archive (a relative path) that becomes the target. Default, as HELM: when the archive holds one
   * top-level file or folder, that entry; otherwise the folder of everything.
   */
  unpackedName?: string;
  /** Expected SHA-256 (hex) of the downloaded file, before unpacking. */
  sha256?: string;
  /** Never use the network (also `FLEXHELM_OFFLINE=1`). */
  offline?: boolean;
  onProgress?: (progress: DownloadProgress) => void;
  /** Extra request headers, e.g. `{ authorization: 'Bearer …' }`. */
  headers?: Record<string, string>;
  /** URL prefix rewrites; merged over `$FLEXHELM_URL_REWRITES`. */
  urlRewrites?: UrlRewrites;
  /** Environment to read `FLEXHELM_OFFLINE` and `FLEXHELM_URL_REWRITES` from (`process.env` when omitted). */
  env?: NodeJS.ProcessEnv;
  /** Failed connection attempts in a row before giving up (default 5). */
  maxAttempts?: number;
  /** Wait before the first retry, doubling each time (default 500 ms). */
  retryDelayMs?: number;
  /** A response that stalls this long is dropped and resumed (default 60 s). */
  idleTimeoutMs?: number;
  signal?: AbortSignal;
}

/** Whether `FLEXHELM_OFFLINE` asks for offline mode (`1`, `true`, `yes`, `on`). */
export function offlineFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(1|true|yes|on)$/i.test(env.FLEXHELM_OFFLINE?.trim() ?? '');
}

/**
 * Makes sure `targetPath` exists, downloading (and unpacking) `url` if it does not, and returns its absolute path. An
 * existing target is used as is. Downloads go to `<target>.partial` (resumed with HTTP Range after an interruption),
 * are checked (length, optional SHA-256, archive integrity), unpacked into a temporary folder next to the target and
 * renamed into place, so the target is never seen half-written. A lock file `<target>.lock` keeps concurrent processes
 * from downloading the same file twice.
 */
export async function ensureFileDownloaded(options: EnsureFileDownloadedOptions): Promise<string> {
  const target = resolve(options.targetPath);
  if (await exists(target)) return target;

  const env = options.env ?? process.env;
  const url = rewriteUrl(options.url, { ...urlRewritesFromEnv(env), ...options.urlRewrites });
  const offline = options.offline ?? offlineFromEnv(env);
  const format = archiveFormatOf(options, target);
  const expectedSha = checkSha256Option(options.sha256);
  const unpackedName = checkUnpackedName(options.unpackedName);
  // Archives are kept whole at `<target>.download` until they are unpacked, so a crash after the download resumes there.
  const downloadPath = format ? `${target}.download` : target;
  const partialPath = `${downloadPath}.partial`;
  const progress = (phase: DownloadProgress['phase']) => (bytesDone: number, bytesTotal: number | undefined) =>
    options.onProgress?.({ phase, url, targetPath: target, bytesDone, bytesTotal });

  if (offline && !(format && (await exists(downloadPath)))) {
    throw new DownloadError('offline', url, target, offlineAdvice(url, target, format ? downloadPath : undefined, unpackedName));
  }

  try {
    await mkdir(dirname(target), { recursive: true });
  } catch (error) {
    throw new DownloadError('filesystem', url, target, `cannot create the folder ${dirname(target)}: ${(error as Error).message}`, { cause: error });
  }

  return withFileLock(
    `${target}.lock`,
    async () => {
      if (await exists(target)) return target; // another process finished it while this one waited

      let downloadedNow = false;
      if (!(format && (await exists(downloadPath)))) {
        await downloadToPartialFile(url, partialPath, target, {
          headers: options.headers,
          maxAttempts: options.maxAttempts,
          retryDelayMs: options.retryDelayMs,
          idleTimeoutMs: options.idleTimeoutMs,
          onProgress: progress('download'),
          signal: options.signal,
        });
        if (expectedSha) await verifySha256(partialPath, expectedSha, url, target, true);
        await commitTempFileAsync(partialPath, downloadPath);
        downloadedNow = true;
      } else if (expectedSha) {
        await verifySha256(downloadPath, expectedSha, url, target, !offline);
      }
      if (!format) return target;

      await unpackInto(downloadPath, format, target, unpackedName, progress('unpack'), (problem, cause) => {
        const keep = offline && !downloadedNow;
        return new DownloadError(
          'archive',
          url,
          target,
          keep
            ? `${problem}. The archive at ${downloadPath} is damaged; replace it with a good copy of ${url}.`
            : `${problem}. The downloaded archive was deleted; run again to download it afresh.`,
          { cause },
        );
      }).catch(async (error: unknown) => {
        if (error instanceof DownloadError && !(offline && !downloadedNow)) await unlink(downloadPath).catch(() => undefined);
        throw error;
      });
      await unlink(downloadPath).catch(() => undefined);
      return target;
    },
    { signal: options.signal },
  );
}

async function unpackInto(
  archivePath: string,
  format: ArchiveFormat,
  target: string,
  unpackedName: string | undefined,
  onProgress: (done: number, total: number) => void,
  archiveError: (problem: string, cause?: unknown) => DownloadError,
): Promise<void> {
  const workDir = await mkdtemp(join(dirname(target), `.${basename(target)}.unpack-`));
  let unpacked = false;
  try {
    try {
      await unpackArchive(archivePath, format, workDir, { outputName: basename(target), onProgress });
    } catch (error) {
      throw archiveError(`the ${format} archive is corrupt or truncated (${(error as Error).message})`, error);
    }
    let chosen = workDir;
    if (unpackedName) {
      chosen = join(workDir, unpackedName);
      if (!(await exists(chosen))) {
        const entries = (await readdir(workDir)).join(', ');
        throw archiveError(`the archive has no entry "${unpackedName}" (its top level holds: ${entries})`);
      }
    } else {
      const entries = await readdir(workDir);
      if (entries.length === 1) chosen = join(workDir, entries[0]!);
    }
    // The unpacked file or folder is synced before it appears under its final name.
    commitTree(chosen, target);
    unpacked = true;
  } finally {
    // A corrupt tar's error can arrive while node-tar still has entry writes in flight: a plain rm then meets files
    // landing behind it (ENOTEMPTY, seen once in CI under load), so it retries while they settle; and a cleanup
    // failure never hides the archive's own error.
    await rm(workDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 20 }).catch((error: unknown) => {
      if (unpacked) throw error;
    });
  }
}

function archiveFormatOf(options: EnsureFileDownloadedOptions, target: string): ArchiveFormat | undefined {
  if (options.unpack === undefined) return undefined;
  if (options.unpack === 'auto') {
    const inferred = inferArchiveFormat(options.url);
    if (!inferred) {
      throw new DownloadError(
        'archive',
        options.url,
        target,
        `cannot tell the archive format from the URL; pass unpack as one of tar.gz, tgz, tar, zip, gz, zst`,
      );
    }
    return inferred;
  }
  if (!isArchiveFormat(options.unpack)) {
    throw new TypeError(`unpack must be 'auto' or one of tar.gz, tgz, tar, zip, gz, zst; got ${JSON.stringify(options.unpack)}.`);
  }
  return options.unpack;
}

function checkSha256Option(sha: string | undefined): string | undefined {
  if (sha === undefined) return undefined;
  if (!/^[0-9a-fA-F]{64}$/.test(sha)) throw new TypeError(`sha256 must be 64 hexadecimal digits; got ${JSON.stringify(sha)}.`);
  return sha.toLowerCase();
}

function checkUnpackedName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const normalized = normalize(name);
  if (!name || isAbsolute(name) || normalized === '.' || normalized.split(/[\\/]/).includes('..')) {
    throw new TypeError(`unpackedName must be a relative path inside the archive, such as "aclImdb"; got ${JSON.stringify(name)}.`);
  }
  return normalized;
}

function offlineAdvice(url: string, target: string, archivePath: string | undefined, unpackedName: string | undefined): string {
  const head = 'offline mode (--offline or FLEXHELM_OFFLINE=1) forbids downloading, and the file is not there.';
  if (!archivePath) return `${head} Download ${url} yourself and save it as ${target}.`;
  const what = unpackedName ? `its entry "${unpackedName}"` : 'its content (a single top-level folder or file is used as is)';
  return `${head} Download ${url} yourself and either save it as ${archivePath} (it is unpacked on the next run) or unpack it and put ${what} at ${target}.`;
}

async function verifySha256(path: string, expected: string, url: string, target: string, deleteOnMismatch: boolean): Promise<void> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  const actual = hash.digest('hex');
  if (actual === expected) return;
  if (deleteOnMismatch) await unlink(path).catch(() => undefined);
  const fate = deleteOnMismatch ? 'The file was deleted; if the source changed on purpose, update the expected checksum.' : `Replace ${path} with a good copy.`;
  throw new DownloadError('checksum', url, target, `SHA-256 mismatch: expected ${expected}, got ${actual}. ${fate}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}
