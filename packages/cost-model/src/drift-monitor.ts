import type { DecoderBackend, StepShape } from '@flexhelm/engine';

/** Predicted milliseconds of one forward step (embedding, all layers, head) of `batch` rows. */
export type StepPredictor = (step: { batch: number; seq: number; pastLen: number }) => number;

export interface DriftReport {
  phase: 'prefill' | 'decode';
  /** Median measured / predicted step time over the steps seen. */
  ratio: number;
  measuredMs: number;
  predictedMs: number;
  steps: number;
}

export interface DriftMonitorOptions {
  /** Relative drift that is reported (default 0.5: measured more than 1.5× or less than 1/1.5 of predicted). */
  threshold?: number;
  /** Steps of a phase collected before judging (the median damps a slow first step). Default 3 prefill, 8 decode. */
  minSteps?: { prefill: number; decode: number };
  report: (r: DriftReport) => void;
}

/**
 * Watches a backend's forward steps (first call of a step to the head call that ends it) and compares their wall time
 * with the cost model's prediction; a phase whose median drifts more than the threshold is reported once.
 */
export class DriftMonitor {
  private current?: { shape: { batch: number; seq: number; pastLen: number }; started: number };
  private readonly ratios = { prefill: [] as number[], decode: [] as number[] };
  private readonly reported = new Set<'prefill' | 'decode'>();

  constructor(
    private readonly predict: StepPredictor,
    private readonly options: DriftMonitorOptions,
  ) {}

  /** Wraps the step-starting calls and the head of `backend` (the instance's own methods; nothing else changes). */
  attach(backend: DecoderBackend): void {
    const setStep = backend.setStep.bind(backend);
    const head = backend.head.bind(backend);
    backend.setStep = (step: StepShape) => {
      this.begin(step);
      return setStep(step);
    };
    // Every batch steps through its cache's forward (one call per step).
    const openKvCache = backend.openKvCache.bind(backend);
    backend.openKvCache = (batch: number) => {
      const cache = openKvCache(batch);
      const forward = cache.forward.bind(cache);
      cache.forward = (ids: Int32Array, positions: Int32Array, step: StepShape) => {
        this.begin(step);
        return forward(ids, positions, step);
      };
      return cache;
    };
    backend.head = async (hidden: Float32Array, rows: number) => {
      const out = await head(hidden, rows);
      this.end();
      return out;
    };
  }

  private begin(step: StepShape): void {
    // OffloadingBackend calls the inner setStep once per micro-batch; only the engine's first call starts a step.
    if (this.current) return;
    this.current = { shape: { batch: step.batch, seq: step.seq, pastLen: step.pastLen }, started: performance.now() };
  }

  /** Ends the step in flight (the head call after it), or does nothing when none is. */
  end(now = performance.now()): void {
    const c = this.current;
    this.current = undefined;
    if (!c) return;
    this.observe(c.shape, now - c.started);
  }

  /** Records one step's measured time (exposed for tests and for callers that time steps themselves). */
  observe(shape: { batch: number; seq: number; pastLen: number }, ms: number): void {
    const phase = shape.seq > 1 || shape.pastLen === 0 ? 'prefill' : 'decode';
    const predicted = this.predict(shape);
    if (!(predicted > 0)) return;
    const list = this.ratios[phase];
    list.push(ms / predicted);
    const need = (this.options.minSteps ?? { prefill: 3, decode: 8 })[phase];
    if (this.reported.has(phase) || list.length < need) return;
    const sorted = [...list].sort((a, b) => a - b);
    const ratio = sorted[sorted.length >> 1]!;
    const threshold = this.options.threshold ?? 0.5;
    if (ratio > 1 + threshold || ratio < 1 / (1 + threshold)) {
      this.reported.add(phase);
      this.options.report({ phase, ratio, measuredMs: ratio * predicted, predictedMs: predicted, steps: list.length });
    }
  }
}
