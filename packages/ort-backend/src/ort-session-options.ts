import type { InferenceSession } from 'onnxruntime-node';

/** What the worker is started with (`OrtBackendOptions`). */
export interface OrtWorkerSettings {
  intraOpNumThreads?: number;
  executionProviders?: string[];
}

/**
 * The options of every session in the onnxruntime worker. The worker holds one session per stage (two per layer:
 * 48 for opt-1.3b), and each session owns an intra-op thread pool whose threads spin after every run by default.
 * A decode step runs the sessions one after another for a few milliseconds each, so the pools of the sessions just
 * run kept spinning on the cores the next session needed: opt-1.3b-shaped batch-1 decode took 2–6× longer with
 * spinning than without on a 2-core host (see bench/RESULTS.md). Blocking threads cost nothing measurable for prefill.
 */
export function ortSessionOptions(settings: OrtWorkerSettings = {}): InferenceSession.SessionOptions {
  // FLEXHELM_ORT_PROFILE=PREFIX: onnxruntime writes a JSON trace per session (PREFIX_<date>.json) when it is closed.
  const profile = process.env.FLEXHELM_ORT_PROFILE;
  return {
    ...(profile ? { enableProfiling: true, profileFilePrefix: profile } : {}),
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    // The memory pattern would allocate one fresh block per new input shape on the second run; plain arena reuse is
    // enough, and fresh memory is what costs most here (first touch of a page, not the copy).
    enableMemPattern: false,
    // No arena per session: each session's arena kept the largest intermediates it ever made (a long prompt's attention
    // scores, once per layer: 4.7 GB for one 8,000-token prompt on a 2-layer model), never released. Without it every
    // session's scratch comes from the one malloc heap, bounded by one run's; steps are chunked so that scratch stays
    // under glibc's mmap threshold and is reused (`ORT_CHUNK_SCORES`).
    enableCpuMemArena: false,
    extra: { session: { intra_op: { allow_spinning: '0' } } },
    ...(settings.intraOpNumThreads ? { intraOpNumThreads: settings.intraOpNumThreads } : {}),
    ...(settings.executionProviders ? { executionProviders: settings.executionProviders } : {}),
  };
}
