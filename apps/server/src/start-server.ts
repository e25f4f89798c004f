import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_N, DEFAULT_MAX_PROMPTS, DEFAULT_MAX_TOKENS, type Tokenizer, type WindowService } from '@flexhelm/core';
import { familyEntry, type Engine } from '@flexhelm/engine';
import { RequestCache } from '@flexhelm/request-cache';
import { defaultCachePath } from '@flexhelm/session';
import { EngineExecutor } from '@flexhelm/runner';
import { ApiError } from './api-error.js';
import { bearerAuth } from './bearer-auth.js';
import { parseChatRequest } from './chat-request.js';
import { ChatService } from './chat-service.js';
import type { ChatSetup } from './chat-setup.js';
import { charsPerToken } from './chars-per-token.js';
import { specialTokenIds } from './special-token-ids.js';
import { CompletionBatcher } from './completion-batcher.js';
import { parseCompletionRequest, type CompletionParams } from './completion-request.js';
import { CompletionService, type CompletionResponse, type Usage } from './completion-service.js';
import { EngineGate } from './engine-gate.js';
import { bodyTooLarge, checkJsonType, jsonChunks, parseJsonText, sseEvent } from './http-io.js';
import { isLoopback } from './is-loopback.js';
import { clientErrorHandler, DEFAULT_PROTOCOL_LIMITS, frameworkErrors, missingHost, shownPath } from './protocol-errors.js';
import { isFinished, type JobRecord } from './job-record.js';
import type { JobLimits } from './job-limits.js';
import { JobManager } from './job-manager.js';
import { JobStore } from './job-store.js';
import { registerResultsSite } from './results-routes.js';
import { ResultsStore } from './results-store.js';
import { runPredictions } from './run-predictions.js';
import { summarizeSuiteInWorker } from './suite-summarizer.js';
import { TextWorkers } from './text-workers.js';
import { TokenizeService } from './tokenize-service.js';

export interface ServerOptions {
  engine: Engine;
  tokenizer: Tokenizer;
  windowService: WindowService;
  /** The model's HELM name, e.g. `facebook/opt-125m`: jobs' run specs, the request cache file. */
  modelName: string;
  /** The name clients send as `model` and GET /v1/models lists (vLLM's `--served-model-name`). Default `modelName`. */
  servedModelName?: string;
  /** The model's identity in the request cache (weights fingerprint). */
  modelId: string;
  /** The model's chat template and end-of-turn tokens (`readChatSetup`): serves `POST /v1/chat/completions` when set. */
  chat?: ChatSetup;
  /** Longest a chat template may take to render one request's messages, timed from when a worker starts it (ms). Default 2000. */
  chatTemplateTimeoutMs?: number;
  /**
   * The model folder the tokenizer comes from: worker threads load it to tokenize prompts off the event loop, and its
   * longest token bounds how many characters can fit the window (longer prompts are refused without tokenizing).
   * Without it prompts are tokenized on the event loop.
   */
  tokenizerFolder?: string;
  /**
   * Heap cap (V8 old generation, MiB) of the worker thread that prepares a job's runs and computes their metrics
   * (with `tokenizerFolder`; one job runs at a time), and of the suite summarizer. Default 512.
   */
  jobWorkerHeapMiB?: number;
  /** Worker threads that render chat templates and tokenize prompts. Default 2. */
  textWorkers?: number;
  /** Prompts waiting for a text worker beyond which requests are refused with 503. Default 256. */
  maxTextQueue?: number;
  /** HELM output folder: jobs write `<outputPath>/runs/<suite>/<run>/` as `flexhelm run` does. */
  outputPath: string;
  /** Job records (default `<outputPath>/server/jobs`). */
  stateDir?: string;
  /** An open request cache (a session's), used instead of opening `cachePath`; closed with the server. */
  cache?: RequestCache;
  /** Request cache shared with `flexhelm run` (default `<outputPath>/cache/<model>.sqlite`). */
  cachePath?: string;
  dataDir?: string;
  offline?: boolean;
  /**
   * Write each finished job's suite summaries (what `flexhelm summarize` writes, read by the results site). Default
   * true; HELM's schema.yaml comes from `$FLEXHELM_HELM_SOURCE_DIR` or `helmDataDir` (downloaded there once).
   */
  summarizeSuites?: boolean;
  /** flexhelm's data folder (for HELM's schema.yaml); default `resolveDataDir()`. */
  helmDataDir?: string;
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
  /** Largest request line + headers (bytes; 431 beyond). Default 16 KiB (Node's). */
  maxHeaderBytes?: number;
  maxN?: number;
  maxPrompts?: number;
  /** Most rows (prompts × n) per completions request. Default 1024. */
  maxRowsPerRequest?: number;
  /** Most rows × tokens × top-k per completions request. Default 262144. */
  maxResponseEntries?: number;
  /**
   * Bytes of a token stream a client may leave unread (the socket's buffers full) beyond what one engine step sends at
   * once: more, and the stream is closed with a log line and its rows cancelled. Default 4 MiB.
   */
  maxStreamBufferBytes?: number;
  /** What one evaluation job may ask for. Default: 1000 runs, max_eval_instances 10000, num_train_trials 10. */
  jobLimits?: Partial<JobLimits>;
  /** How long shutdown waits for in-flight requests before closing their connections. Default 30 s. */
  shutdownGraceMs?: number;
  /** Time to receive a request's headers (ms; 408 after). Default 10 s. */
  headersTimeoutMs?: number;
  /** Time to receive a whole request, headers and body (ms; 408 after). Responses (generations, event streams) are not limited. Default 30 s. */
  bodyTimeoutMs?: number;
  /** How long a keep-alive connection may sit idle between requests (ms). Default 5 s. */
  keepAliveTimeoutMs?: number;
  /** Open connections beyond this are closed as they arrive. Default 256. */
  maxConnections?: number;
  log?: (message: string) => void;
  /** Receives one access-log line per request (method, path, status, prompt/completion tokens, ms); none when unset. */
  accessLog?: (line: string) => void;
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

/**
 * What the routes need from the completions service. `signal` fires when the client goes away before its answer;
 * `stream` yields OpenAI `text_completion` chunks for `stream: true` (absent until the service provides it).
 */
interface Completions {
  complete(params: CompletionParams, options?: { signal?: AbortSignal }): Promise<CompletionResponse>;
  stream?(params: CompletionParams, options: { signal: AbortSignal }): AsyncIterable<object>;
}

const viewerDir = fileURLToPath(new URL('../viewer/', import.meta.url));
const STATIC: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/viewer.js': { file: 'viewer.js', type: 'text/javascript; charset=utf-8' },
  '/viewer.css': { file: 'viewer.css', type: 'text/css; charset=utf-8' },
};
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
type Method = 'GET' | 'POST' | 'DELETE';
type Handler = (req: FastifyRequest, reply: FastifyReply) => unknown;

const pathOf = (req: FastifyRequest) => new URL(req.url, 'http://localhost').pathname.replace(/\/+$/, '') || '/';
const JSON_TYPE = 'application/json; charset=utf-8';
/** Delays between the first half-close probes (ms); then one a second. */
const HALF_CLOSE_PROBES_MS = [0, 10, 100];

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
  const maxStreamBufferBytes = options.maxStreamBufferBytes ?? 4 * 1024 * 1024;
  const maxHeaderBytes = options.maxHeaderBytes ?? DEFAULT_PROTOCOL_LIMITS.maxHeaderBytes;
  const decode = (ids: number[]) => (ids.length === 0 ? '' : options.tokenizer.decode(ids));

  const gate = new EngineGate();
  const batcher = new CompletionBatcher(options.engine, gate, { maxBatchSize, windowMs: options.batchWindowMs ?? 10, decode });
  const perToken = options.tokenizerFolder === undefined ? undefined : charsPerToken(options.tokenizerFolder);
  // Two pools: prompts are tokenized and ids decoded below the event loop's priority (bulk work that must never delay
  // a health check); chat templates render at normal priority, as their time limit is wall-clock. Threads start on
  // first use, so a server that gets no chat request never starts the second pool.
  const textWorkers = new TextWorkers({
    tokenizerFolder: options.tokenizerFolder,
    tokenizerName: options.tokenizer.name,
    modelLabel: served,
    threads: options.textWorkers,
    maxQueue: options.maxTextQueue,
    background: true,
  });
  const chatWorkers =
    options.chat &&
    new TextWorkers({
      tokenizerFolder: options.tokenizerFolder,
      tokenizerName: options.tokenizer.name,
      template: options.chat.template,
      modelLabel: served,
      threads: options.textWorkers,
      maxQueue: options.maxTextQueue,
      renderTimeoutMs: options.chatTemplateTimeoutMs,
    });
  const completionService = new CompletionService(served, options.engine, options.tokenizer, batcher, {
    maxResponseEntries: options.maxResponseEntries,
    textWorkers,
    charsPerToken: perToken,
    specialTokenIds: options.tokenizerFolder === undefined ? undefined : specialTokenIds(options.tokenizerFolder),
  });
  const completions: Completions = completionService;
  const chat =
    options.chat &&
    chatWorkers &&
    new ChatService(served, completionService, chatWorkers, options.tokenizer, {
      endTokenIds: options.chat.endTokenIds,
      maxTokens: limits.maxTokens,
      maxPositions: options.engine.description.maxPositions,
      charsPerToken: perToken,
    });
  const tokenizeService = new TokenizeService(served, options.engine, options.tokenizer, textWorkers, chat);
  const cache = options.cache ?? RequestCache.open(options.cachePath ?? defaultCachePath(options.outputPath, options.modelName));
  const jobs = new JobManager({
    store: new JobStore(options.stateDir ?? join(options.outputPath, 'server', 'jobs'), {
      onError: (id, err) => log(`job record ${id} was not saved (${err.message}); it is kept in memory and saved again on its next change`),
    }),
    limits: options.jobLimits,
    requestLimits: limits,
    gate,
    engineExecutor: new EngineExecutor(options.engine, options.tokenizer, { modelId: options.modelId, maxBatchSize }),
    cache,
    chunkSize: Math.max(8, maxBatchSize),
    windowService: options.windowService,
    helmModel: options.modelName,
    outputPath: options.outputPath,
    dataDir: options.dataDir,
    offline: options.offline,
    // The worker rebuilds the session's window service from the model folder (`openSession`'s choice, by family).
    runWorker: options.tokenizerFolder === undefined ? undefined : {
      tokenizerFolder: options.tokenizerFolder,
      tokenizerName: options.tokenizer.name,
      window: familyEntry(options.engine.description.family).tokens.window === 'helm-opt' ? { kind: 'helm-opt', maxPositions: options.engine.description.maxPositions } : { kind: 'model-folder' },
      heapMiB: options.jobWorkerHeapMiB,
    },
    summarize: options.summarizeSuites === false ? undefined : (suite) => summarizeSuiteInWorker({ outputPath: options.outputPath, suite, dataDir: options.helmDataDir, offline: options.offline }, options.jobWorkerHeapMiB),
    log,
  });
  const startedAt = Math.floor(Date.now() / 1000);
  let closing = false;
  let inFlight = 0;
  const streams = new Set<ServerResponse>();
  /** Responses that are event streams (a half-close probe may add a comment line to them). */
  const eventStreams = new WeakSet<ServerResponse>();
  /** Requests whose client went away: their errors are an info line, not an internal error. */
  const abandoned = new WeakSet<FastifyRequest>();

  // Limits and timeouts are the framework's configuration: Node answers a request whose headers or body do not arrive
  // in time with 408 (checked every `connectionsCheckingInterval`); the timeouts end once the request is received, so
  // long generations and event streams are never cut.
  const app = Fastify({
    bodyLimit: maxBodyBytes,
    requestTimeout: bodyTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 5_000,
    connectionTimeout: 0,
    http: {
      maxHeaderSize: maxHeaderBytes,
      headersTimeout: headersTimeoutMs,
      requestTimeout: bodyTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 4))),
      requireHostHeader: false, // refused in onRequest, in OpenAI's shape (Node's own 400 has no body)
    },
    return503OnClosing: false,
    exposeHeadRoutes: false,
    frameworkErrors,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    clientErrorHandler: clientErrorHandler({ maxHeaderBytes, headersTimeoutMs, bodyTimeoutMs }),
  });
  app.server.maxConnections = options.maxConnections ?? 256;
  // A client that half-closes after sending its request (`printf … | nc`, some proxies: shutdown(SHUT_WR)) still reads
  // the answer: Node would otherwise treat end of input as an abort and end the connection unanswered. The connection
  // closes once the answer is written. (A documented field of Node's HTTP server, not in its option types.)
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;

  // One parser for every body: the type is checked here so a wrong one is 415 in OpenAI's shape, and the text is
  // parsed in the route so an empty or broken body is a 400 saying so.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    try {
      checkJsonType(req.headers['content-type']);
      done(null, body);
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  const authorize = (req: FastifyRequest) => checkKey(req.headers.authorization);

  /** Token counts of each answered request, for its access-log line. */
  const usage = new WeakMap<FastifyRequest, Usage>();
  /** Streamed requests whose client asked for the usage chunk (it is always made, for the access log). */
  const wantsUsage = new WeakSet<FastifyRequest>();
  function usageForLog<P extends { includeUsage: boolean }>(req: FastifyRequest, params: P): P {
    if (params.includeUsage) wantsUsage.add(req);
    return { ...params, includeUsage: true };
  }

  /** One line per request once its answer is over: method, path, status, prompt/completion tokens, milliseconds. */
  function logAccess(req: FastifyRequest, reply: FastifyReply, startedAtMs: number): void {
    if (!options.accessLog) return;
    const u = usage.get(req);
    const tokens = u ? `prompt_tokens=${u.prompt_tokens} completion_tokens=${u.completion_tokens}` : 'prompt_tokens=- completion_tokens=-';
    const status = reply.raw.writableFinished || reply.raw.headersSent ? reply.raw.statusCode : 499; // 499: the client left first (nginx's code)
    options.accessLog(`${req.method} ${pathOf(req)} ${status} ${tokens} ${Math.round(performance.now() - startedAtMs)} ms`);
  }

  /** Aborted when the client closes the connection before its response is complete. */
  function disconnectSignal(req: FastifyRequest, reply: FastifyReply): AbortSignal {
    const controller = new AbortController();
    reply.raw.once('close', () => {
      if (reply.raw.writableFinished) return;
      abandoned.add(req);
      controller.abort(new Error(`client closed the connection: ${req.method} ${pathOf(req)}`));
    });
    return controller.signal;
  }

  /**
   * End of input is not a disconnect, but a client that closed its socket entirely sends the same FIN. After a FIN the
   * request is probed: an interim `102 Processing` while the answer has not started (HTTP/1.1 clients must accept and
   * skip it), a comment line in an event stream under way. A half-closed client reads it; a gone one answers with a
   * reset that fails the next probe (at once, then 10 and 100 ms later, then each second) or write, which closes the
   * connection and so cancels the request as any disconnect does. A FIN once an event stream has started is a
   * disconnect (cancelled at once, as before).
   */
  function watchHalfClose(req: FastifyRequest, reply: FastifyReply): void {
    const socket = req.raw.socket;
    if (req.raw.httpVersion !== '1.1') return; // 1xx answers are not for HTTP/1.0 clients
    // The first probe at once, the next ones soon after (a gone client's reset has arrived by then, on loopback within
    // the first 10 ms, and that write fails), then one a second for as long as the answer runs.
    let timer: NodeJS.Timeout | undefined;
    const probe = (step = 0) => {
      const res = reply.raw;
      if (res.writableEnded || socket.destroyed) return;
      if (!res.headersSent) res.writeProcessing();
      // An event stream under way: a comment line, which event-stream clients skip, does the same between tokens.
      else if (eventStreams.has(res)) res.write(':\n\n');
      else return; // a plain answer already being written fails by itself if the client is gone
      timer = setTimeout(() => probe(step + 1), HALF_CLOSE_PROBES_MS[step] ?? 1_000);
      timer.unref();
    };
    reply.raw.once('close', () => clearTimeout(timer));
    const onEnd = () => {
      // A FIN in the middle of an event stream comes from a client that left (half-closing clients do it right after
      // their request): cancel at once, as before, rather than a write or two later.
      if (reply.raw.headersSent && eventStreams.has(reply.raw)) socket.destroy();
      else probe();
    };
    if (socket.readableEnded) onEnd();
    else {
      socket.once('end', onEnd);
      reply.raw.once('close', () => socket.off('end', onEnd)); // keep-alive sockets carry many requests
    }
  }

  app.addHook('onRequest', async (req, reply) => {
    if (closing) {
      reply.code(503).header('connection', 'close').type(JSON_TYPE);
      return reply.send(new ApiError(503, 'the server is shutting down; retry against its replacement', 'server_error').toJSON());
    }
    const noHost = missingHost(req.raw);
    if (noHost) {
      reply.code(noHost.status).header('connection', 'close').type(JSON_TYPE);
      return reply.send(noHost.toJSON());
    }
    inFlight++;
    const t0 = performance.now();
    reply.raw.once('close', () => {
      inFlight--;
      logAccess(req, reply, t0);
    });
    watchHalfClose(req, reply);
    const path = pathOf(req);
    if (path.startsWith('/v1/') || path === '/tokenize' || path === '/detokenize') authorize(req);
    return undefined;
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    if (abandoned.has(req)) {
      log(`client closed the connection: ${req.method} ${pathOf(req)} (${err.message})`);
      return reply.raw.destroyed ? undefined : reply.raw.end();
    }
    let apiError: ApiError;
    if (err instanceof ApiError) apiError = err;
    else if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') apiError = bodyTooLarge(maxBodyBytes, Number(req.headers['content-length']));
    else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) apiError = new ApiError(err.statusCode, err.message, 'invalid_request_error');
    else {
      apiError = new ApiError(500, `internal error: ${err.message ?? String(err)}`, 'server_error');
      log(`internal error on ${req.method} ${req.url}: ${err.stack ?? String(err)}`);
    }
    if (reply.sent || reply.raw.headersSent) return reply.raw.end();
    // A body we refused to read must not be parsed as the next request on this connection.
    if (apiError.status === 413) reply.header('connection', 'close');
    return reply.code(apiError.status).type(JSON_TYPE).send(apiError.toJSON());
  });

  app.setNotFoundHandler(async (req) => {
    const path = shownPath(pathOf(req));
    if (!path.startsWith('/v1/')) throw new ApiError(404, `no such page ${path}: the API lives under /v1 and the viewer at /`, 'invalid_request_error', null, 'not_found');
    throw new ApiError(404, `no endpoint ${req.method} ${path}`, 'invalid_request_error', null, 'not_found');
  });

  /** One path, every method: those without a handler are 405 naming the allowed ones. */
  function endpoint(url: string, handlers: Partial<Record<Method, Handler>>): void {
    app.route({
      method: METHODS,
      url,
      handler: async (req, reply) => {
        const handler = handlers[req.method as Method];
        if (!handler) {
          const allowed = Object.keys(handlers).join(' or ');
          throw new ApiError(405, `${req.method} is not allowed on ${pathOf(req)}; use ${allowed}`, 'invalid_request_error', null, 'method_not_allowed');
        }
        return handler(req, reply);
      },
    });
  }

  for (const [url, asset] of Object.entries(STATIC)) {
    app.route({
      method: ['GET', 'HEAD'],
      url,
      handler: async (_req, reply) => reply.type(asset.type).header('cache-control', 'no-cache').send(readFileSync(join(viewerDir, asset.file))),
    });
  }
  registerResultsSite(app, new ResultsStore({ outputPath: options.outputPath }));
  app.get('/healthz', async (_req, reply) => reply.type(JSON_TYPE).send({ status: closing ? 'stopping' : 'ok' }));
  // Readiness (vLLM's /health): 200 while the model serves; 503 once shutting down (and, from `flexhelm-server`'s
  // loading responder, while the model loads).
  app.get('/health', async (_req, reply) => {
    if (!closing) return reply.type(JSON_TYPE).send({ status: 'ok', model: served });
    return reply.code(503).type(JSON_TYPE).send({ status: 'stopping', ...new ApiError(503, 'the server is shutting down', 'server_error', null, 'shutting_down').toJSON() });
  });

  const model = () => ({ id: served, object: 'model', created: startedAt, owned_by: 'flexhelm', max_context_length: options.engine.description.maxPositions });
  endpoint('/v1/models', { GET: () => ({ object: 'list', data: [model()] }) });
  // Model names hold a "/" (facebook/opt-125m): the id is the rest of the path.
  endpoint('/v1/models/*', {
    GET: (req) => {
      const id = (req.params as { '*': string })['*'].replace(/\/+$/, '');
      if (id !== served) {
        throw new ApiError(404, `The model '${id}' does not exist on this server; it serves '${served}'`, 'invalid_request_error', 'model', 'model_not_found');
      }
      return model();
    },
  });

  endpoint('/v1/completions', {
    POST: async (req, reply) => {
      const body = parseJsonText(req.body as string | undefined);
      const params = parseCompletionRequest(body, limits);
      const signal = disconnectSignal(req, reply);
      const stream = (params as { stream?: boolean | null }).stream ?? (body as { stream?: unknown }).stream === true;
      if (stream) return streamCompletion(req, reply, usageForLog(req, params), signal);
      const response = await completions.complete(params, { signal });
      usage.set(req, response.usage);
      // Choice by choice: echo + top logprobs on many prompts makes megabytes that need not exist as one string.
      return reply.code(200).type(JSON_TYPE).send(Readable.from(jsonChunks(response as unknown as Record<string, unknown>, 'choices')));
    },
  });

  endpoint('/v1/chat/completions', {
    POST: async (req, reply) => {
      const body = parseJsonText(req.body as string | undefined);
      if (!chat) {
        throw new ApiError(400, `the model '${served}' has no chat template (no chat_template in its tokenizer_config.json), so it serves /v1/completions only`, 'invalid_request_error', 'model', 'model_not_chat');
      }
      const params = parseChatRequest(body, limits);
      const signal = disconnectSignal(req, reply);
      if (params.stream) return sendEventStream(req, reply, await chat.stream(usageForLog(req, params), { signal }), signal);
      const response = await chat.complete(params, { signal });
      usage.set(req, response.usage);
      return reply.code(200).type(JSON_TYPE).send(Readable.from(jsonChunks(response as unknown as Record<string, unknown>, 'choices')));
    },
  });

  async function streamCompletion(req: FastifyRequest, reply: FastifyReply, params: CompletionParams, signal: AbortSignal): Promise<void> {
    if (!completions.stream) throw new ApiError(400, 'stream=true is not supported: send stream=false (or leave it out) and read the whole response', 'invalid_request_error', 'stream');
    return sendEventStream(req, reply, completions.stream(params, { signal }), signal);
  }

  /**
   * OpenAI's server-sent events: each chunk as a `data:` event, then `[DONE]`; an error mid-stream as a last event.
   * Chunks are written as the engine makes them, never waiting for the client: the engine's batch is shared, so pausing
   * it for one slow reader would stall every other request in it. A client that leaves more than
   * `maxStreamBufferBytes` unread beyond one engine step's burst is dropped instead: one log line, the stream closed,
   * its rows cancelled at the engine's next step.
   */
  async function sendEventStream(req: FastifyRequest, reply: FastifyReply, stream: AsyncIterable<object>, signal: AbortSignal): Promise<void> {
    const chunks = stream[Symbol.asyncIterator]();
    // Errors before the first chunk (a bad model name, a prompt over the window) are still a plain 4xx.
    let next = await chunks.next();
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    eventStreams.add(res);
    // One engine step sends at most three events per row of its batch (echoed prompt, token, finish), all at once: a
    // burst a reading client cannot have taken yet (echoed prompts with top logprobs make large ones).
    let burst = 0;
    try {
      for (; !next.done; next = await chunks.next()) {
        if (res.destroyed) return;
        const chunk = next.value as { usage?: Usage; choices?: unknown[] };
        if (chunk.usage) {
          usage.set(req, chunk.usage);
          if (!wantsUsage.has(req)) continue; // asked for the access log only
        }
        const event = sseEvent(next.value);
        burst = Math.max(burst, 3 * maxBatchSize * Buffer.byteLength(event));
        res.write(event);
        if (res.writableLength - burst > maxStreamBufferBytes) {
          log(`client is not reading its event stream: ${res.writableLength} bytes unsent, over --max-stream-buffer ${maxStreamBufferBytes}; closed it and cancelled its rows: ${req.method} ${pathOf(req)}`);
          abandoned.add(req);
          res.destroy();
          return;
        }
      }
      res.write('data: [DONE]\n\n');
    } catch (err) {
      if (signal.aborted) log(`client closed the connection: ${req.method} ${pathOf(req)} (${(err as Error).message})`);
      else {
        log(`event stream failed on ${req.method} ${req.url}: ${(err as Error).stack ?? String(err)}`);
        const e = err instanceof ApiError ? err : new ApiError(500, `internal error: ${(err as Error).message}`, 'server_error');
        res.write(sseEvent(e.toJSON()));
      }
    } finally {
      res.end();
      // Leaving early (a dropped client) ends the generator, which cancels its rows.
      await chunks.return?.();
    }
  }

  // vLLM's tokenizer endpoints (at the root, as vLLM serves them; the API key guards them as /v1).
  endpoint('/tokenize', { POST: (req) => tokenizeService.tokenize(parseJsonText(req.body as string | undefined)) });
  endpoint('/detokenize', { POST: (req) => tokenizeService.detokenize(parseJsonText(req.body as string | undefined)) });

  endpoint('/v1/stats', { GET: () => ({ ...batcher.stats, maxBatchSize }) });
  endpoint('/v1/runs', {
    GET: () => ({ object: 'list', data: jobs.list() }),
    POST: async (req, reply) => reply.code(201).send(await jobs.submit(parseJsonText(req.body as string | undefined))),
  });

  const jobId = (req: FastifyRequest) => {
    const { id } = req.params as { id: string };
    if (!/^[\w-]+$/.test(id)) throw new ApiError(404, `no endpoint ${req.method} ${pathOf(req)}`, 'invalid_request_error', null, 'not_found');
    return id;
  };
  endpoint('/v1/runs/:id', { GET: (req) => jobs.get(jobId(req)), DELETE: (req) => jobs.cancel(jobId(req)) });
  endpoint('/v1/runs/:id/events', { GET: (req, reply) => streamEvents(req, reply, jobId(req)) });
  endpoint('/v1/runs/:id/predictions', {
    GET: (req) => {
      const id = jobId(req);
      const job = jobs.get(id);
      const which = (req.query as { run?: string }).run ?? '0';
      const run = /^\d+$/.test(which) ? job.runs[Number(which)] : job.runs.find((r) => r.name === which);
      if (!run) throw new ApiError(404, `job ${id} has no run ${which}; give ?run=<index or name> of one of its ${job.runs.length} runs`, 'invalid_request_error', 'run');
      if (!run.runDir) throw new ApiError(409, `run ${run.name} is ${run.status}: predictions exist once it is done`, 'invalid_request_error', 'run');
      return { object: 'list', run: run.name, data: runPredictions(options.outputPath, run.runDir) };
    },
  });

  function streamEvents(_req: FastifyRequest, reply: FastifyReply, id: string): void {
    const job = jobs.get(id);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    eventStreams.add(res);
    streams.add(res);
    const send = (event: string, j: JobRecord) => res.write(sseEvent(j, event));
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
    res.on('close', finish);
    send('progress', job);
    if (isFinished(job.status)) {
      send('end', job);
      finish();
    }
  }

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
  const close = () =>
    (closed ??= (async () => {
      closing = true;
      const stopped = app.close();
      await jobs.stop();
      for (const s of streams) s.end();
      const deadline = Date.now() + (options.shutdownGraceMs ?? 30_000);
      while ((inFlight > 0 || batcher.inFlight > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      app.server.closeIdleConnections();
      if (inFlight > 0) log(`shutdown grace period over: closing ${inFlight} unfinished request(s)`);
      app.server.closeAllConnections();
      await stopped;
      await batcher.idle();
      await Promise.all([textWorkers.close(), chatWorkers?.close()]);
      cache.close();
    })());

  return { url: `http://${shownHost}:${address.port}`, host: address.address, port: address.port, batcher, jobs, close };
}
