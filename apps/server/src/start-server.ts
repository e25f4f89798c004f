import type { AddressInfo } from 'node:net';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_N, DEFAULT_MAX_PROMPTS, DEFAULT_MAX_TOKENS } from '@flexhelm/core';
import { bearerAuth } from './bearer-auth.js';
import { registerChatCompletionRoutes } from './chat-completion-routes.js';
import type { CompletionBatcher } from './completion-batcher.js';
import { registerCompletionRoutes } from './completion-routes.js';
import { createApiApp } from './create-api-app.js';
import { endpoint } from './endpoint.js';
import { parseJsonText } from './http-io.js';
import { isLoopback } from './is-loopback.js';
import type { JobManager } from './job-manager.js';
import { registerJobRoutes } from './job-routes.js';
import { registerModelRoutes } from './model-routes.js';
import { DEFAULT_PROTOCOL_LIMITS } from './protocol-errors.js';
import { registerRequestLifecycle } from './request-lifecycle.js';
import { createRequestState } from './request-state.js';
import type { EventStreamContext } from './send-event-stream.js';
import type { ServerOptions } from './server-options.js';
import { createServerServices } from './server-services.js';
import { shutdownServer } from './shutdown-server.js';
import { registerStatusRoutes } from './status-routes.js';
import { registerViewerRoutes } from './viewer-routes.js';

export type { ServerOptions } from './server-options.js';

export interface RunningServer {
  url: string;
  host: string;
  port: number;
  batcher: CompletionBatcher;
  jobs: JobManager;
  /** Graceful stop: refuse new requests, finish in-flight ones, save running jobs for resumption. Idempotent. */
  close(): Promise<void>;
}

/** Starts flexhelm's HTTP server: OpenAI completions, evaluation jobs and the results viewer. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && !options.apiKey) {
    throw new Error(`refusing to bind ${host} without an API key: anyone who can reach it could use the model. Pass --api-key (or set FLEXHELM_API_KEY), or bind 127.0.0.1`);
  }
  const checkKey = bearerAuth(options.apiKey);
  const log = options.log ?? (() => {});
  const served = options.servedModelName ?? options.modelName;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const bodyTimeoutMs = options.bodyTimeoutMs ?? DEFAULT_PROTOCOL_LIMITS.bodyTimeoutMs;
  // Node refuses a headers timeout longer than the whole-request timeout.
  const headersTimeoutMs = Math.min(options.headersTimeoutMs ?? DEFAULT_PROTOCOL_LIMITS.headersTimeoutMs, bodyTimeoutMs || Infinity);
  const limits = { maxTokens: options.maxTokens ?? DEFAULT_MAX_TOKENS, maxN: options.maxN ?? DEFAULT_MAX_N, maxPrompts: options.maxPrompts ?? DEFAULT_MAX_PROMPTS, maxRowsPerRequest: options.maxRowsPerRequest };
  const maxBatchSize = options.maxBatchSize ?? 8;

  const services = createServerServices(options, { served, limits, maxBatchSize, log });
  const { batcher, textWorkers, chatWorkers, tokenizeService, cache, jobs } = services;
  const startedAt = Math.floor(Date.now() / 1000);
  const state = createRequestState();

  const app = createApiApp({
    maxBodyBytes,
    maxHeaderBytes: options.maxHeaderBytes ?? DEFAULT_PROTOCOL_LIMITS.maxHeaderBytes,
    headersTimeoutMs,
    bodyTimeoutMs,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs ?? 5_000,
    maxConnections: options.maxConnections ?? 256,
  });
  registerRequestLifecycle(app, { state, checkKey, maxBodyBytes, log, accessLog: options.accessLog });
  registerViewerRoutes(app, options.outputPath);
  registerStatusRoutes(app, { state, served, batcher, maxBatchSize });
  registerModelRoutes(app, { served, startedAt, maxPositions: options.engine.description.maxPositions });
  const events: EventStreamContext = { state, maxBatchSize, maxStreamBufferBytes: options.maxStreamBufferBytes ?? 4 * 1024 * 1024, log };
  registerCompletionRoutes(app, { completions: services.completionService, limits, events });
  registerChatCompletionRoutes(app, { chat: services.chat, served, limits, events });
  // vLLM's tokenizer endpoints (at the root, as vLLM serves them; the API key guards them as /v1).
  endpoint(app, '/tokenize', { POST: (req) => tokenizeService.tokenize(parseJsonText(req.body as string | undefined)) });
  endpoint(app, '/detokenize', { POST: (req) => tokenizeService.detokenize(parseJsonText(req.body as string | undefined)) });
  registerJobRoutes(app, { jobs, state, outputPath: options.outputPath });

  try {
    await app.listen({ port: options.port ?? 0, host });
  } catch (err) {
    cache.close();
    await Promise.all([textWorkers.close(), chatWorkers?.close()]);
    await app.close().catch(() => {});
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new Error(`port ${options.port} on ${host} is already in use: stop what holds it or pass another --port`, { cause: err });
    throw err;
  }
  jobs.start();
  const address = app.server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let closed: Promise<void> | undefined;
  const close = () => (closed ??= shutdownServer({ app, state, services, graceMs: options.shutdownGraceMs ?? 30_000, log }));
  return { url: `http://${shownHost}:${address.port}`, host: address.address, port: address.port, batcher, jobs, close };
}
