/** Why a download failed, for callers that react differently (e.g. the CLI suggests `--offline` fixes). */
export type DownloadFailure = 'offline' | 'http' | 'network' | 'truncated' | 'checksum' | 'archive' | 'filesystem';

/** A failed {@link ensureFileDownloaded}: the message always names the URL and the target path. */
export class DownloadError extends Error {
  readonly url: string;
  readonly targetPath: string;
  readonly failure: DownloadFailure;
  /** The HTTP status, when the server answered with an error. */
  readonly status: number | undefined;

  constructor(failure: DownloadFailure, url: string, targetPath: string, detail: string, options: { status?: number; cause?: unknown } = {}) {
    super(`Could not get ${url} into ${targetPath}: ${detail}`, { cause: options.cause });
    this.name = 'DownloadError';
    this.failure = failure;
    this.url = url;
    this.targetPath = targetPath;
    this.status = options.status;
  }
}
