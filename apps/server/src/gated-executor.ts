import type { Request, RequestResult } from '@flexhelm/core';
import type { ExecutionProgress, RequestExecutor } from '@flexhelm/runner';
import type { EngineGate } from './engine-gate.js';

/** Raised between engine calls once a job is cancelled or the server stops. */
class JobAbortedError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'AbortError';
  }
}

/**
 * An evaluation job's way onto the shared engine: each call waits its turn at the gate (completions traffic keeps
 * flowing between a job's chunks) and checks the job's abort signal first.
 */
export class GatedExecutor implements RequestExecutor {
  readonly modelId: string;

  constructor(
    private readonly inner: RequestExecutor,
    private readonly gate: EngineGate,
    private readonly signal: AbortSignal,
  ) {
    this.modelId = inner.modelId;
  }

  execute(requests: readonly Request[], onProgress?: (p: ExecutionProgress) => void): Promise<RequestResult[]> {
    return this.gate.run(() => {
      if (this.signal.aborted) throw new JobAbortedError(String(this.signal.reason ?? 'aborted'));
      return this.inner.execute(requests, onProgress);
    });
  }
}
