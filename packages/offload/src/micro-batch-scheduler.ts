import type { KvPair, StageCompute, StepShape } from '@flexhelm/engine';
import type { Policy } from './policy.js';
import type { TieredKvCache } from './tiered-kv-cache.js';

/** Counters the scheduler adds to (the backend's stats). Times in milliseconds. */
export interface ScheduleStats {
  computeMs: number;
  cacheStallMs: number;
}

/** A layer call of one micro-batch starting or ending, for tests and profiling. */
export type ComputeEvent = { kind: 'compute-start' | 'compute-end'; layer: number; microBatch: number };

/** A (layer, micro-batch, pastLen) cache slot in schedule order. */
type Slot = [layer: number, microBatch: number, pastLen: number];

/**
 * FlexLLMGen's block schedule for one layer (spec §4): a batch larger than `gpuBatchSize` runs as micro-batches that
 * all reuse the one load of the layer's weights, each with its own KV workspace (no shared buffer, so micro-batches
 * never see each other's keys). With the cache on the tiers, the caches of the next slots load while a micro-batch
 * computes and its new K/V are stored behind the compute. Knows nothing of where weights come from.
 */
export class MicroBatchScheduler {
  private step?: StepShape;
  /** Cache loads started ahead of their slot's turn, keyed "layer.microBatch.pastLen", for the cache `aheadOf`. */
  private readonly ahead = new Map<string, Promise<KvPair>>();
  private aheadOf?: TieredKvCache;

  constructor(
    private readonly inner: StageCompute,
    private readonly policy: Policy,
    private readonly layers: number,
    private readonly hiddenSize: number,
    /** K (or V) values per token and row: kvHeads · headDim (less than hidden with grouped-query attention). */
    private readonly kvRow: number,
    private readonly stats: ScheduleStats,
    private readonly trace?: (event: ComputeEvent) => void,
  ) {}

  /** The step's shape; a batch that fits one micro-batch sets it in the backend at once (no per-layer slicing). */
  async setStep(step: StepShape): Promise<void> {
    this.step = step;
    if (step.batch <= this.policy.gpuBatchSize) await this.inner.setStep(step);
  }

  private current(index: number, hidden: Float32Array): StepShape {
    const step = this.step;
    if (!step) throw new Error(`offload: layer ${index} called before setStep`);
    if (hidden.length !== step.batch * step.seq * this.hiddenSize) throw new Error(`offload: hidden holds ${hidden.length} values for a step of ${step.batch}×${step.seq}`);
    return step;
  }

  /** Layer `index` with the past K/V passed in (the plain cache): micro-batches of `gpuBatchSize` rows. */
  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const step = this.current(index, hidden);
    const g = this.policy.gpuBatchSize;
    if (step.batch <= g) {
      this.trace?.({ kind: 'compute-start', layer: index, microBatch: 0 });
      const r = await this.inner.layer(index, hidden, past);
      this.trace?.({ kind: 'compute-end', layer: index, microBatch: 0 });
      return r;
    }
    const S = step.seq;
    const T = step.pastLen + S;
    const E = this.hiddenSize;
    // K and V are [batch, kvHeads, tokens, headDim].
    const pastRow = this.kvRow * step.pastLen;
    const presentRow = this.kvRow * T;
    const y = new Float32Array(step.batch * S * E);
    const k = new Float32Array(step.batch * presentRow);
    const v = new Float32Array(step.batch * presentRow);
    for (let b0 = 0; b0 < step.batch; b0 += g) {
      const b1 = Math.min(step.batch, b0 + g);
      const rows = b1 - b0;
      // Each micro-batch gets its own copies of its rows (its own KV workspace): nothing is shared between them.
      const r = await this.microBatch(index, b0 / g, step, b0, b1, hidden, { k: past.k.slice(b0 * pastRow, b1 * pastRow), v: past.v.slice(b0 * pastRow, b1 * pastRow) });
      if (r.present.k.length !== rows * presentRow) throw new Error(`offload: layer ${index} returned ${r.present.k.length} cache values for ${rows} rows, expected ${rows * presentRow}`);
      y.set(r.hidden, b0 * S * E);
      k.set(r.present.k, b0 * presentRow);
      v.set(r.present.v, b0 * presentRow);
    }
    return { hidden: y, present: { k, v } };
  }

  /**
   * FlexLLMGen's overlapped multi-batch loop for one layer with the cache on the tiers (spec §4.3), read ahead one
   * micro-batch further: while micro-batch k computes, the caches of the next two slots in schedule order load
   * (wrapping to the next layer and to the next step's layer 0), so a cache read is issued a whole micro-batch before
   * it is needed; k's new K/V are stored behind the compute. At most three slots' K/V are in flight.
   */
  async tieredLayer(cache: TieredKvCache, index: number, hidden: Float32Array): Promise<Float32Array> {
    const step = this.current(index, hidden);
    if (this.aheadOf !== cache) {
      // A new batch: loads read ahead for the previous one are its own to wait for (TieredKvCache.close).
      this.ahead.clear();
      this.aheadOf = cache;
    }
    const S = step.seq;
    const T = step.pastLen + S;
    const E = this.hiddenSize;
    const M = cache.microBatches;
    const g = this.policy.gpuBatchSize;
    const key = ([j, m, p]: Slot) => `${j}.${m}.${p}`;
    const take = (slot: Slot) => {
      const p = this.ahead.get(key(slot));
      this.ahead.delete(key(slot));
      return p ?? cache.load(...slot);
    };
    // The slot after (j, m) in schedule order; past the next step's first layer nothing is known yet (its shape).
    const after = ([j, m, p]: Slot): Slot | undefined => {
      if (m + 1 < M) return [j, m + 1, p];
      if (j + 1 < this.layers) return [j + 1, 0, p];
      return p === step.pastLen ? [0, 0, T] : undefined;
    };
    const y = new Float32Array(step.batch * S * E);
    const t0 = performance.now();
    let pending = take([index, 0, step.pastLen]);
    for (let m = 0; m < M; m++) {
      const waitStart = performance.now();
      const past = await pending;
      this.stats.cacheStallMs += performance.now() - waitStart;
      // The next two slots. A slot of the next step waits for this step's store into it, so only one whose store is
      // already queued (not this micro-batch's or a later one's of this layer: a one-layer model).
      const next = after([index, m, step.pastLen]);
      for (const slot of [next, next && after(next)]) {
        if (!slot || (slot[2] !== step.pastLen && slot[0] === index && slot[1] >= m) || this.ahead.has(key(slot))) continue;
        const p = cache.load(...slot);
        p.catch(() => undefined);
        this.ahead.set(key(slot), p);
      }
      if (m + 1 < M) pending = take([index, m + 1, step.pastLen]);
      const b0 = m * g;
      const b1 = Math.min(step.batch, b0 + g);
      const r = await this.microBatch(index, m, step, b0, b1, hidden, past);
      y.set(r.hidden, b0 * S * E);
      cache.store(index, m, r.present, step.pastLen, S);
    }
    this.stats.computeMs += performance.now() - t0;
    return y;
  }

  /** Rows `b0 … b1` of the step through layer `index`, with their own mask rows and KV. */
  private async microBatch(index: number, m: number, step: StepShape, b0: number, b1: number, hidden: Float32Array, past: KvPair) {
    const S = step.seq;
    const T = step.pastLen + S;
    const E = this.hiddenSize;
    await this.inner.setStep({
      batch: b1 - b0,
      seq: S,
      pastLen: step.pastLen,
      maskBias: step.maskBias.slice(b0 * S * T, b1 * S * T),
      ...(step.positions ? { positions: step.positions.slice(b0 * S, b1 * S) } : {}),
    });
    this.trace?.({ kind: 'compute-start', layer: index, microBatch: m });
    const r = await this.inner.layer(index, hidden.slice(b0 * S * E, b1 * S * E), past);
    this.trace?.({ kind: 'compute-end', layer: index, microBatch: m });
    return r;
  }
}
