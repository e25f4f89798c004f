import type { Tokenizer, WindowService } from '@flexhelm/core';
import type { Engine } from '@flexhelm/engine';
import type { RequestCache } from '@flexhelm/request-cache';
import type { ChatSetup } from './chat-setup.js';
import type { JobLimits } from './job-limits.js';

/** `startServer`'s options: the model and its tokenizer, where results go, and the server's limits. */
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
