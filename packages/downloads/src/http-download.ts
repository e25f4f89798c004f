import { createWriteStream } from 'node:fs';
import { stat, unlink } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { setTimeout as sleep } from 'node:timers/promises';
import { DownloadError } from './download-error.js';

export interface HttpDownloadOptions {
  /** Extra request headers (e.g. `Authorization` for a private Hugging Face repo). */
  headers?: Record<string, string>;
  /** Connection attempts in a row that may fail without receiving a byte before giving up. */
  maxAttempts?: number;
  /** A response that sends nothing for this long is dropped and resumed. */
  idleTimeoutMs?: number;
  /** Wait before the first retry; doubles with every further failed attempt. */
  retryDelayMs?: number;
  onProgress?: (bytesDone: number, bytesTotal: number | undefined) => void;
  signal?: AbortSignal;
}

export interface HttpDownloadResult {
  bytes: number;
  /** The size the server announced, when it did. */
  total: number | undefined;
}

/**
 * Downloads `url` into `partialPath`, continuing from what that file already holds with an HTTP Range request. A server
 * that answers 200 instead of 206 (Range ignored) makes it start over. Dropped connections and truncated bodies are
 * resumed; HTTP errors are not retried. `targetPath` is only used in error messages.
 */
export async function downloadToPartialFile(url: string, partialPath: string, targetPath: string, options: HttpDownloadOptions = {}): Promise<HttpDownloadResult> {
  const maxAttempts = options.maxAttempts ?? 5;
  const idleTimeoutMs = options.idleTimeoutMs ?? 60_000;
  const retryDelayMs = options.retryDelayMs ?? 500;
  let failures = 0;

  const retryOrFail = async (failure: 'network' | 'truncated', problem: string, cause?: unknown): Promise<void> => {
    failures++;
    if (failures >= maxAttempts) {
      throw new DownloadError(failure, url, targetPath, `${problem} (gave up after ${failures} attempts; rerun to resume from ${partialPath})`, { cause });
    }
    await sleep(retryDelayMs * 2 ** (failures - 1), undefined, { signal: options.signal });
  };

  for (;;) {
    options.signal?.throwIfAborted();
    const have = await sizeOf(partialPath);
    const controller = new AbortController();
    const abortFromCaller = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', abortFromCaller, { once: true });
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdleTimer = () => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => controller.abort(new Error(`no data for ${idleTimeoutMs} ms`)), idleTimeoutMs);
    };
    try {
      let response: Response;
      armIdleTimer();
      try {
        const headers: Record<string, string> = { ...options.headers, 'accept-encoding': 'identity' };
        if (have > 0) headers.range = `bytes=${have}-`;
        response = await fetch(url, { headers, redirect: 'follow', signal: controller.signal });
      } catch (error) {
        options.signal?.throwIfAborted();
        // A host name that does not resolve (offline, or a typo) will not resolve a second later: say so at once.
        if (isNameResolutionError(error)) {
          throw new DownloadError('network', url, targetPath, `host ${new URL(url).hostname} not found (${describe(error)}): this machine is offline or the name is wrong; not retried`, { cause: error });
        }
        await retryOrFail('network', `connection failed: ${describe(error)}`, error);
        continue;
      }

      if (have > 0 && response.status === 416) {
        await response.body?.cancel();
        // "Range not satisfiable": either the partial file is already complete, or it is longer than the file now is.
        const total = parseContentRange(response.headers.get('content-range'))?.total;
        if (total === have) return { bytes: have, total };
        await unlink(partialPath);
        continue;
      }
      if (!response.ok) {
        await response.body?.cancel();
        const status = `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
        throw new DownloadError('http', url, targetPath, `the server answered ${status}`, { status: response.status });
      }

      let offset = 0;
      let total = parseLength(response.headers.get('content-length'));
      if (response.status === 206) {
        const range = parseContentRange(response.headers.get('content-range'));
        if (!range || range.start !== have) {
          // Not the part we asked for: start again from scratch.
          await response.body?.cancel();
          await unlink(partialPath);
          continue;
        }
        offset = have;
        total = range.total ?? (total === undefined ? undefined : have + total);
      }

      let done = offset;
      options.onProgress?.(done, total);
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          armIdleTimer();
          done += chunk.length;
          options.onProgress?.(done, total);
          callback(null, chunk);
        },
      });
      try {
        if (response.body) {
          const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
          await pipeline(body, counter, createWriteStream(partialPath, { flags: offset === 0 ? 'w' : 'a' }));
        } else {
          await pipeline(Readable.from([]), createWriteStream(partialPath, { flags: offset === 0 ? 'w' : 'a' }));
        }
      } catch (error) {
        options.signal?.throwIfAborted();
        if (done > have) failures = 0; // progress was made: this is a fresh series of attempts
        const problem = total === undefined ? `connection lost after ${done} bytes: ${describe(error)}` : `connection lost after ${done} of ${total} bytes: ${describe(error)}`;
        await retryOrFail(total === undefined ? 'network' : 'truncated', problem, error);
        continue;
      }
      if (total !== undefined && done !== total) {
        if (done > have) failures = 0;
        if (done > total) {
          await unlink(partialPath);
          await retryOrFail('truncated', `received ${done} bytes but the server announced ${total}`);
        } else {
          await retryOrFail('truncated', `the body ended after ${done} of ${total} bytes`);
        }
        continue;
      }
      return { bytes: done, total };
    } finally {
      clearTimeout(idleTimer);
      options.signal?.removeEventListener('abort', abortFromCaller);
    }
  }
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
}

function parseLength(header: string | null): number | undefined {
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim());
}

// `Content-Range: bytes START-END/TOTAL`, or on a 416 `bytes` + ` */TOTAL`; TOTAL may be `*`.
function parseContentRange(header: string | null): { start: number | undefined; total: number | undefined } | undefined {
  if (header === null) return undefined;
  const match = /^\s*bytes\s+(?:(\d+)-(\d+)|\*)\s*\/\s*(\d+|\*)\s*$/i.exec(header);
  if (!match) return undefined;
  return {
    start: match[1] === undefined ? undefined : Number(match[1]),
    total: match[3] === '*' ? undefined : Number(match[3]),
  };
}

/** fetch wraps socket errors (`ECONNREFUSED`, `UND_ERR_SOCKET`…) in a generic TypeError; show the cause too. */
/** getaddrinfo's "no such host" (ENOTFOUND) and "no answer from the resolver" (EAI_AGAIN): no retry helps either. */
function isNameResolutionError(error: unknown): boolean {
  const code = ((error as { cause?: { code?: unknown } } | null)?.cause?.code ?? (error as { code?: unknown } | null)?.code) as unknown;
  return code === 'ENOTFOUND' || code === 'EAI_AGAIN';
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as (Error & { code?: string }) | undefined;
  if (cause && typeof cause === 'object') {
    const detail = cause.code ? `${cause.code}${cause.message ? `: ${cause.message}` : ''}` : cause.message;
    return `${error.message} (${detail})`;
  }
  return error.message;
}
