import { statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import Fastify from 'fastify';
import { ApiError } from './api-error.js';
import { bearerAuth } from './bearer-auth.js';
import { isLoopback } from './is-loopback.js';
import { clientErrorHandler, DEFAULT_PROTOCOL_LIMITS, frameworkErrors, missingHost, shownPath } from './protocol-errors.js';
import { registerResultsSite } from './results-routes.js';
import { ResultsStore } from './results-store.js';

export interface ResultsServerOptions {
  /** HELM output folder holding `runs/<suite>/`; nothing outside it is read, nothing is written. */
  outputPath: string;
  /** Show only this suite. */
  suite?: string;
  host?: string;
  port?: number;
  /** Bearer token for /v1/results; required to bind a non-loopback address. */
  apiKey?: string;
  log?: (message: string) => void;
}

export interface RunningResultsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** Serves the results site over a folder of finished runs, without a model (`flexhelm serve-results`). */
export async function startResultsServer(options: ResultsServerOptions): Promise<RunningResultsServer> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && !options.apiKey) {
    throw new Error(`refusing to bind ${host} without an API key: anyone who can reach it could read the results. Pass --api-key (or set FLEXHELM_API_KEY), or bind 127.0.0.1`);
  }
  const outputPath = resolve(options.outputPath);
  let isDir = false;
  try {
    isDir = statSync(outputPath).isDirectory();
  } catch {}
  if (!isDir) throw new Error(`no output folder ${outputPath}: give --output-path the folder that holds runs/<suite>/`);
  const checkKey = bearerAuth(options.apiKey);
  const log = options.log ?? (() => {});
  const limits = DEFAULT_PROTOCOL_LIMITS;
  // The API server's HTTP limits, and its refusals below the routes in OpenAI's shape.
  const app = Fastify({
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    exposeHeadRoutes: false,
    requestTimeout: limits.bodyTimeoutMs,
    http: { maxHeaderSize: limits.maxHeaderBytes, headersTimeout: limits.headersTimeoutMs, requestTimeout: limits.bodyTimeoutMs, requireHostHeader: false },
    frameworkErrors,
    clientErrorHandler: clientErrorHandler(limits),
  });
  app.addHook('onRequest', async (req) => {
    const noHost = missingHost(req.raw);
    if (noHost) throw noHost;
    if (req.url.startsWith('/v1/')) checkKey(req.headers.authorization);
  });
  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) e = new ApiError(err.statusCode, err.message);
    else {
      e = new ApiError(500, `internal error: ${err.message}`, 'server_error');
      log(`internal error on ${req.method} ${req.url}: ${err.stack ?? String(err)}`);
    }
    return reply.code(e.status).type(JSON_TYPE).send(e.toJSON());
  });
  app.setNotFoundHandler(async (req) => {
    throw new ApiError(404, `no such page ${shownPath(req.url.split('?')[0]!)}: the results site is at /results/`, 'invalid_request_error', null, 'not_found');
  });
  app.get('/', async (_req, reply) => reply.redirect('/results/'));
  app.get('/healthz', async () => ({ status: 'ok' }));
  registerResultsSite(app, new ResultsStore({ outputPath, suite: options.suite }));
  try {
    await app.listen({ host, port: options.port ?? 0 });
  } catch (err) {
    await app.close().catch(() => {});
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new Error(`port ${options.port} on ${host} is already in use: stop what holds it or pass another --port`, { cause: err });
    throw err;
  }
  const address = app.server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return { url: `http://${shown}:${address.port}`, port: address.port, close: () => app.close() };
}
