import { timingSafeEqual, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Tokenizer, WindowService } from '@flexhelm/core';
import type { OptEngine } from '@flexhelm/engine';
import { RequestCache } from '@flexhelm/request-cache';
import { EngineExecutor } from '@flexhelm/runner';
import { ApiError } from './api-error.js';
import { CompletionBatcher } from './completion-batcher.js';
import { parseCompletionRequest } from './completion-request.js';
import { CompletionService } from './completion-service.js';
import { EngineGate } from './engine-gate.js';
import { readJsonBody, sendJson } from './http-io.js';
import { isLoopback } from './is-loopback.js';
import { isFinished, type JobRecord } from './job-record.js';
import { JobManager } from './job-manager.js';
import { JobStore } from './job-store.js';
import { runPredictions } from './run-predictions.js';

export interface ServerOptions {
  engine: OptEngine;
  tokenizer: Tokenizer;
  windowService: WindowService;
  /** The name clients send as `model` and GET /v1/models lists, e.g. `facebook/opt-125m`. */
  modelName: string;
  /** The model's identity in the request cache (weights fingerprint). */
  modelId: string;
  /** HELM output folder: jobs write `<outputPath>/runs/<suite>/<run>/` as `flexhelm run` does. */
  outputPath: string;
  /** Job records (default `<outputPath>/server/jobs`). */
  stateDir?: string;
  /** Request cache shared with `flexhelm run` (default `<outputPath>/cache/<model>.sqlite`). */
  cachePath?: string;
  dataDir?: string;
  offline?: boolean;
  host?: string;
  port?: number;
  /** Bearer token every /v1 request must carry; required to bind a non-loopback address. */
  apiKey?: string;
  /** Rows per engine batch. Default 8. */
  maxBatchSize?: number;
  /** How long a batch waits for more requests. Default 10 ms. */
  batchWindowMs?: number;
  /** Largest `max_tokens`. Default 512. */
  maxTokens?: number;
  /** Largest request body. Default 1 MiB. */
  maxBodyBytes?: number;
  maxN?: number;
  maxPrompts?: number;
  /** How long shutdown waits for in-flight requests before closing their connections. Default 30 s. */
  shutdownGraceMs?: number;
  log?: (message: string) => void;
}

export interface RunningServer {
  url: string;
  host: string;
  port: number;
  batcher: CompletionBatcher;
  jobs: JobManager;
  /** Graceful stop: refuse new requests, finish in-flight ones, save running jobs for resumption. Idempotent. */
  close(): Promise<void>;
}

const viewerDir = fileURLToPath(new URL('../viewer/', import.meta.url));
const STATIC: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/viewer.js': { file: 'viewer.js', type: 'text/javascript; charset=utf-8' },
  '/viewer.css': { file: 'viewer.css', type: 'text/css; charset=utf-8' },
};

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Starts flexhelm's HTTP server: OpenAI completions, evaluation jobs and the results viewer. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && !options.apiKey) {
    throw new Error(`refusing to bind ${host} without an API key: anyone who can reach it could use the model. Pass --api-key (or set FLEXHELM_API_KEY), or bind 127.0.0.1`);
  }
  if (options.apiKey !== undefined && options.apiKey.length < 8) throw new Error('the API key must be at least 8 characters long');
  const log = options.log ?? (() => {});
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const limits = { maxTokens: options.maxTokens ?? 512, maxN: options.maxN ?? 16, maxPrompts: options.maxPrompts ?? 64 };
  const maxBatchSize = options.maxBatchSize ?? 8;
  const decode = (ids: number[]) => (ids.length === 0 ? '' : options.tokenizer.decode(ids));

  const gate = new EngineGate();
  const batcher = new CompletionBatcher(options.engine, gate, { maxBatchSize, windowMs: options.batchWindowMs ?? 10, decode });
  const completions = new CompletionService(options.modelName, options.engine, options.tokenizer, batcher);
  const cache = RequestCache.open(options.cachePath ?? join(options.outputPath, 'cache', `${options.modelName.replace(/[^\w.-]+/g, '_')}.sqlite`));
  const jobs = new JobManager({
    store: new JobStore(options.stateDir ?? join(options.outputPath, 'server', 'jobs')),
    gate,
    engineExecutor: new EngineExecutor(options.engine, options.tokenizer, { modelId: options.modelId, maxBatchSize }),
    cache,
    chunkSize: Math.max(8, maxBatchSize),
    windowService: options.windowService,
    helmModel: options.modelName,
    outputPath: options.outputPath,
    dataDir: options.dataDir,
    offline: options.offline,
    log,
  });
  const keyDigest = options.apiKey === undefined ? undefined : digest(options.apiKey);
  const startedAt = Math.floor(Date.now() / 1000);
  let closing = false;
  let inFlight = 0;
  const streams = new Set<ServerResponse>();

  function authorize(req: IncomingMessage): void {
    if (!keyDigest) return;
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header);
    if (!match || !timingSafeEqual(digest(match[1]!.trim()), keyDigest)) {
      throw new ApiError(401, match ? 'Incorrect API key provided.' : 'Missing API key: send the header "Authorization: Bearer <key>".', 'invalid_request_error', null, 'invalid_api_key');
    }
  }

  function streamEvents(req: IncomingMessage, res: ServerResponse, id: string): void {
    const job = jobs.get(id);
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    streams.add(res);
    const send = (event: string, j: JobRecord) => res.write(`event: ${event}\ndata: ${JSON.stringify(j)}\n\n`);
    const finish = () => {
      unsubscribe();
      clearInterval(heartbeat);
      streams.delete(res);
      res.end();
    };
    const unsubscribe = jobs.subscribe(id, (j) => {
      send('progress', j);
      if (isFinished(j.status)) {
        send('end', j);
        finish();
      }
    });
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    req.on('close', finish);
    send('progress', job);
    if (isFinished(job.status)) {
      send('end', job);
      finish();
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    const asset = STATIC[path];
    if (asset && (method === 'GET' || method === 'HEAD')) {
      const body = readFileSync(join(viewerDir, asset.file));
      res.writeHead(200, { 'content-type': asset.type, 'content-length': body.length, 'cache-control': 'no-cache' });
      res.end(method === 'HEAD' ? undefined : body);
      return;
    }
    if (path === '/healthz') return sendJson(res, 200, { status: closing ? 'stopping' : 'ok' });
    if (!path.startsWith('/v1/')) throw new ApiError(404, `no such page ${path}: the API lives under /v1 and the viewer at /`, 'invalid_request_error', null, 'not_found');
    authorize(req);
    const allow = (...methods: string[]) => {
      if (!methods.includes(method)) throw new ApiError(405, `${method} is not allowed on ${path}; use ${methods.join(' or ')}`, 'invalid_request_error', null, 'method_not_allowed');
    };
    if (path === '/v1/models') {
      allow('GET');
      return sendJson(res, 200, {
        object: 'list',
        data: [{ id: options.modelName, object: 'model', created: startedAt, owned_by: 'flexhelm', max_context_length: options.engine.config.maxPositionEmbeddings }],
      });
    }
    if (path === '/v1/completions') {
      allow('POST');
      const params = parseCompletionRequest(await readJsonBody(req, maxBodyBytes), limits);
      return sendJson(res, 200, await completions.complete(params));
    }
    if (path === '/v1/stats') {
      allow('GET');
      return sendJson(res, 200, { batches: batcher.stats.batches, requests: batcher.stats.requests, rows: batcher.stats.rows, maxBatchSize });
    }
    if (path === '/v1/runs') {
      allow('GET', 'POST');
      if (method === 'POST') return sendJson(res, 201, jobs.submit(await readJsonBody(req, maxBodyBytes)));
      return sendJson(res, 200, { object: 'list', data: jobs.list() });
    }
    const m = /^\/v1\/runs\/([\w-]+)(\/events|\/predictions)?$/.exec(path);
    if (m) {
      const id = m[1]!; // the pattern's first group always takes part
      const sub = m[2];
      if (sub === '/events') {
        allow('GET');
        return streamEvents(req, res, id);
      }
      if (sub === '/predictions') {
        allow('GET');
        const job = jobs.get(id);
        const which = url.searchParams.get('run') ?? '0';
        const run = /^\d+$/.test(which) ? job.runs[Number(which)] : job.runs.find((r) => r.name === which);
        if (!run) throw new ApiError(404, `job ${id} has no run ${which}; give ?run=<index or name> of one of its ${job.runs.length} runs`, 'invalid_request_error', 'run');
        if (!run.runDir) throw new ApiError(409, `run ${run.name} is ${run.status}: predictions exist once it is done`, 'invalid_request_error', 'run');
        return sendJson(res, 200, { object: 'list', run: run.name, data: runPredictions(run.runDir) });
      }
      allow('GET', 'DELETE');
      return sendJson(res, 200, method === 'DELETE' ? jobs.cancel(id) : jobs.get(id));
    }
    throw new ApiError(404, `no endpoint ${method} ${path}`, 'invalid_request_error', null, 'not_found');
  }

  const server = createServer((req, res) => {
    if (closing) {
      req.resume();
      return sendJson(res, 503, new ApiError(503, 'the server is shutting down; retry against its replacement', 'server_error').toJSON(), { connection: 'close' });
    }
    inFlight++;
    res.on('close', () => inFlight--);
    route(req, res).catch((err: unknown) => {
      const apiError =
        err instanceof ApiError ? err : new ApiError(500, `internal error: ${(err as Error).message ?? String(err)}`, 'server_error');
      if (!(err instanceof ApiError)) log(`internal error on ${req.method} ${req.url}: ${(err as Error).stack ?? String(err)}`);
      if (res.headersSent) return void res.end();
      // A body we refused to read must not be parsed as the next request on this connection.
      const drop: Record<string, string> = apiError.status === 413 ? { connection: 'close' } : {};
      sendJson(res, apiError.status, apiError.toJSON(), drop);
    });
  });
  server.requestTimeout = 0; // long generations and event streams must not be cut by Node's default

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    cache.close();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new Error(`port ${options.port} on ${host} is already in use: stop what holds it or pass another --port`, { cause: err });
    throw err;
  }
  jobs.start();
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= (async () => {
      closing = true;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      await jobs.stop();
      for (const s of streams) s.end();
      const deadline = Date.now() + (options.shutdownGraceMs ?? 30_000);
      while ((inFlight > 0 || batcher.inFlight > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      server.closeIdleConnections();
      if (inFlight > 0) log(`shutdown grace period over: closing ${inFlight} unfinished request(s)`);
      server.closeAllConnections();
      await stopped;
      await batcher.idle();
      cache.close();
    })());

  return { url: `http://${shownHost}:${address.port}`, host: address.address, port: address.port, batcher, jobs, close };
}
