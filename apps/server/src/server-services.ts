import { join } from 'node:path';
import { familyEntry } from '@flexhelm/engine';
import { RequestCache } from '@flexhelm/request-cache';
import { EngineExecutor } from '@flexhelm/runner';
import { defaultCachePath } from '@flexhelm/session';
import { ChatService } from './chat-service.js';
import { charsPerToken } from './chars-per-token.js';
import { CompletionBatcher } from './completion-batcher.js';
import type { CompletionLimits } from './completion-request.js';
import { CompletionService } from './completion-service.js';
import { EngineGate } from './engine-gate.js';
import { JobManager } from './job-manager.js';
import { JobStore } from './job-store.js';
import type { ServerOptions } from './server-options.js';
import { specialTokenIds } from './special-token-ids.js';
import { summarizeSuiteInWorker } from './suite-summarizer.js';
import { TextWorkers } from './text-workers.js';
import { TokenizeService } from './tokenize-service.js';

/** What `startServer` works out from its options before building the services. */
export interface ServerSettings {
  /** The model name clients send as `model`. */
  served: string;
  limits: CompletionLimits;
  maxBatchSize: number;
  log: (message: string) => void;
}

/** The API server's services: what its routes call and its shutdown stops. */
export interface ServerServices {
  batcher: CompletionBatcher;
  /** Tokenizes prompts and decodes ids. */
  textWorkers: TextWorkers;
  /** Renders chat templates; only with a chat template. */
  chatWorkers: TextWorkers | undefined;
  completionService: CompletionService;
  chat: ChatService | undefined;
  tokenizeService: TokenizeService;
  cache: RequestCache;
  jobs: JobManager;
}

/** Builds the services the API server shares between its routes, sharing one engine gate between requests and jobs. */
export function createServerServices(options: ServerOptions, settings: ServerSettings): ServerServices {
  const { served, limits, maxBatchSize, log } = settings;
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
  return { batcher, textWorkers, chatWorkers, completionService, chat, tokenizeService, cache, jobs };
}
