import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the server answers one path. */
export interface ServedFile {
  body: string | Uint8Array;
  /** Answer with this status and no file (e.g. 500); default: serve the file. */
  status?: number;
  /** Answer 200 with the whole file even when a Range is asked for. */
  ignoreRange?: boolean;
  /** For the next `cutTimes` requests, drop the connection after sending this many body bytes. */
  cutAfterBytes?: number;
  cutTimes?: number;
  /** For the next `stallTimes` requests, stop sending (without closing) after `cutAfterBytes` bytes. */
  stallTimes?: number;
  headers?: Record<string, string>;
}

/** One request the server received. */
export interface ServedRequest {
  path: string;
  range: string | undefined;
  status: number;
  /** The `Authorization` header sent, if any. */
  authorization: string | undefined;
}

/**
 * A real HTTP server on 127.0.0.1 (random port) serving in-memory files, with Range support and switches to simulate
 * failures (dropped connections, ignored Range, HTTP errors). For tests of code that downloads.
 */
export class LoopbackFileServer {
  readonly requests: ServedRequest[] = [];
  private readonly files = new Map<string, ServedFile>();
  private bearer: string | undefined;

  private constructor(
    private readonly server: Server,
    readonly baseUrl: string,
  ) {}

  static async start(files: Record<string, ServedFile | string | Uint8Array> = {}): Promise<LoopbackFileServer> {
    let instance: LoopbackFileServer | undefined;
    const server = createServer((req, res) => instance?.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    instance = new LoopbackFileServer(server, `http://127.0.0.1:${port}`);
    for (const [path, file] of Object.entries(files)) instance.set(path, file);
    return instance;
  }

  /** The URL of `path` (which starts with `/`). */
  url(path: string): string {
    return `${this.baseUrl}${path}`;
  }

  set(path: string, file: ServedFile | string | Uint8Array): void {
    this.files.set(path, typeof file === 'string' || file instanceof Uint8Array ? { body: file } : { ...file });
  }

  /**
   * Answers every request as the Hub answers for a gated repository: 401 without `Authorization: Bearer <token>`,
   * 403 with another token. `undefined` serves everyone again.
   */
  requireToken(token: string | undefined): void {
    this.bearer = token;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', this.baseUrl).pathname;
    const range = req.headers.range;
    const file = this.files.get(path);
    const authorization = req.headers.authorization;
    const answer = (status: number, headers: Record<string, string | number>, body?: Buffer) => {
      this.requests.push({ path, range, status, authorization });
      res.writeHead(status, headers);
      if (!body || req.method === 'HEAD') {
        res.end();
        return;
      }
      if (file?.cutAfterBytes !== undefined && (file.cutTimes ?? 0) > 0) {
        file.cutTimes = (file.cutTimes ?? 0) - 1;
        // Give the client time to consume what was sent: a fetch body that errors drops chunks it has not handed out yet.
        res.write(body.subarray(0, file.cutAfterBytes), () => setTimeout(() => res.destroy(), 150));
        return;
      }
      if (file?.cutAfterBytes !== undefined && (file.stallTimes ?? 0) > 0) {
        file.stallTimes = (file.stallTimes ?? 0) - 1;
        res.write(body.subarray(0, file.cutAfterBytes)); // and never end: the client must give up on its own
        return;
      }
      res.end(body);
    };
    if (this.bearer !== undefined && authorization !== `Bearer ${this.bearer}`) {
      const status = authorization === undefined ? 401 : 403;
      answer(status, { 'content-type': 'text/plain' }, Buffer.from(status === 401 ? 'Access to this model is restricted. You must be authenticated.' : 'Access to this model is restricted and you are not in the authorized list.'));
      return;
    }
    if (!file) {
      answer(404, { 'content-type': 'text/plain' }, Buffer.from('not found'));
      return;
    }
    if (file.status !== undefined) {
      answer(file.status, { 'content-type': 'text/plain' }, Buffer.from(`status ${file.status}`));
      return;
    }
    const body = typeof file.body === 'string' ? Buffer.from(file.body, 'utf8') : Buffer.from(file.body);
    const common = { 'accept-ranges': file.ignoreRange ? 'none' : 'bytes', ...file.headers };
    const match = range && !file.ignoreRange ? /^bytes=(\d+)-(\d*)$/.exec(range) : null;
    if (match) {
      const start = Number(match[1]);
      const end = match[2] ? Math.min(Number(match[2]), body.length - 1) : body.length - 1;
      if (start >= body.length) {
        answer(416, { ...common, 'content-range': `bytes */${body.length}` });
        return;
      }
      const part = body.subarray(start, end + 1);
      answer(206, { ...common, 'content-length': part.length, 'content-range': `bytes ${start}-${end}/${body.length}` }, part);
      return;
    }
    answer(200, { ...common, 'content-length': body.length }, body);
  }
}
