import type { InPlaceKvLayers, KvPair, StageCompute, StepShape } from '@flexhelm/engine';
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
    /** The inner backend's in-place KV capability, for the cache's in-place micro-batches (`TieredKvCache.isInPlace`). */
    private readonly inPlace?: InPlaceKvLayers,
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
      const pastRows = { k: past.k.slice(b0 * pastRow, b1 * pastRow), v: past.v.slice(b0 * pastRow, b1 * pastRow) };
      const r = await this.microBatch(index, b0 / g, step, b0, b1, hidden, (h) => this.inner.layer(index, h, pastRows));
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
   * it is needed; k's new K/V are stored behind the compute. At most three slots' K/V are in flight. A micro-batch
   * whose cache is kept in place (`TieredKvCache.isInPlace`) loads and stores nothing: its layer writes the new
   * tokens into the cache's buffers (`InPlaceKvLayers.layerInPlace`).
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
    const take = (slot: Slot): Promise<KvPair> | undefined => {
      if (cache.isInPlace(slot[1])) return undefined;
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
    // One micro-batch: its layer's output is the layer's output (no copy); else each lands in its rows of y.
    const y = M === 1 ? new Float32Array(0) : new Float32Array(step.batch * S * E);
    let out: Float32Array | undefined;
    const t0 = performance.now();
    let pending = take([index, 0, step.pastLen]);
    for (let m = 0; m < M; m++) {
      const waitStart = performance.now();
      const past = await pending;
      this.stats.cacheStallMs += performance.now() - waitStart;
      // The next two slots that load (an in-place micro-batch has nothing to read). A slot of the next step waits for
      // this step's store into it, so only one whose store is already queued (not this micro-batch's or a later one's
      // of this layer: a one-layer model).
      const next = after([index, m, step.pastLen]);
      for (const slot of [next, next && after(next)]) {
        if (!slot || cache.isInPlace(slot[1]) || (slot[2] !== step.pastLen && slot[0] === index && slot[1] >= m) || this.ahead.has(key(slot))) continue;
        const p = cache.load(...slot);
        p.catch(() => undefined);
        this.ahead.set(key(slot), p);
      }
      if (m + 1 < M) pending = take([index, m + 1, step.pastLen]);
      const b0 = m * g;
      const b1 = Math.min(step.batch, b0 + g);
      if (past) {
        const r = await this.microBatch(index, m, step, b0, b1, hidden, (h) => this.inner.layer(index, h, past));
        if (M === 1) out = r.hidden;
        else y.set(r.hidden, b0 * S * E);
        cache.store(index, m, r.present, step.pastLen, S);
      } else {
        const inPlace = this.inPlace;
        if (!inPlace) throw new Error('offload: the KV cache keeps a micro-batch in place but the backend has no in-place layers');
        const kv = cache.inPlaceKv(index, m, step.pastLen, S);
        const h = await this.microBatch(index, m, step, b0, b1, hidden, (x) => inPlace.layerInPlace(index, x, kv));
        if (M === 1) out = h;
        else y.set(h, b0 * S * E);
      }
    }
    this.stats.computeMs += performance.now() - t0;
    return out ?? y;
  }

  /**
   * Rows `b0 … b1` of the step through layer `index` (`run` with their hidden rows), with their own mask rows and KV.
   * The whole batch in one micro-batch runs on the step `setStep` set and the hidden state as it is (no slices).
   */
  private async microBatch<T>(index: number, m: number, step: StepShape, b0: number, b1: number, hidden: Float32Array, run: (hidden: Float32Array) => Promise<T>): Promise<T> {
    if (b0 === 0 && b1 === step.batch && step.batch <= this.policy.gpuBatchSize) {
      this.trace?.({ kind: 'compute-start', layer: index, microBatch: m });
      const r = await run(hidden);
      this.trace?.({ kind: 'compute-end', layer: index, microBatch: m });
      return r;
    }
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
    const r = await run(hidden.slice(b0 * S * E, b1 * S * E));
    this.trace?.({ kind: 'compute-end', layer: index, microBatch: m });
    return r;
  }
}
