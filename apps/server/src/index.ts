export { startServer, type ServerOptions, type RunningServer } from './start-server.js';
export { ApiError } from './api-error.js';
export { CompletionBatcher, type BatcherOptions, type BatcherStats, type SubmitOptions } from './completion-batcher.js';
export { CompletionRequestSchema, parseCompletionRequest, DEFAULT_MAX_ROWS_PER_REQUEST, type CompletionParams, type CompletionLimits } from './completion-request.js';
export {
  CompletionService,
  DEFAULT_MAX_RESPONSE_ENTRIES,
  type CompleteOptions,
  type CompletionChunk,
  type CompletionResponse,
  type CompletionChoice,
  type CompletionLogprobs,
  type CompletionServiceOptions,
  type FinishedChoice,
  type StreamPiece,
  type Usage,
} from './completion-service.js';
export { PendingText, releasable } from './pending-text.js';
export { ClientAbortError, isClientAbort } from './client-abort-error.js';
export { TokenText } from './token-text.js';
export { EngineGate } from './engine-gate.js';
export { JobManager } from './job-manager.js';
export { JobStore } from './job-store.js';
export { JobRequestSchema, type JobRecord, type JobRequest, type JobStatus } from './job-record.js';
export { runPredictions, type Prediction } from './run-predictions.js';
export { isLoopback } from './is-loopback.js';
export { parseServerArgs, type ServerArgs } from './server-args.js';
export { ChatService, type ChatCompletion, type ChatChunk, type ChatChoice, type ChatLogprobs, type ChatServiceOptions } from './chat-service.js';
export { ChatRequestSchema, parseChatRequest, type ChatParams } from './chat-request.js';
export { readChatSetup, type ChatSetup } from './chat-setup.js';
export { readChatTemplate, ChatTemplateError, type ChatTemplate } from './chat-template.js';
export { ChatTemplateRenderer, type RendererOptions } from './chat-template-renderer.js';
export { startResultsServer, type ResultsServerOptions, type RunningResultsServer } from './start-results-server.js';
export { ResultsStore, type ResultsStoreOptions } from './results-store.js';
export { serveMain } from './main.js';
