import type { Request, RequestResult } from '@flexhelm/core';

/** Progress of an execution: requests finished so far, and generated tokens so far. */
export interface ExecutionProgress {
  done: number;
  total: number;
  generatedTokens: number;
  cachedHits: number;
}

/**
 * What HELM's Executor needs from a model: results for a list of requests, in order. Implementations batch as they
 * see fit; `modelId` identifies the model's weights and compute for caching.
 */
export interface RequestExecutor {
  readonly modelId: string;
  execute(requests: readonly Request[], onProgress?: (p: ExecutionProgress) => void): Promise<RequestResult[]>;
}
