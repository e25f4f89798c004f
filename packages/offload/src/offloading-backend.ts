import { rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  kvValuesPerToken,
  requireKinds,
  StagedKvCache,
  type BackendKvCache,
  type EmbeddingWeights,
  type HeadWeights,
  type KvPair,
  type LayerTensors,
  type ModelDescription,
  type ModelKind,
  type OwnEndWeight,
  type DecoderBackend,
  type LogitsMath,
  type PhaseTotals,
  type StepShape,
  type StreamedLayers,
} from '@flexhelm/engine';
import { ActivationHome } from './activation-home.js';
import { IoClock } from './io-clock.js';
import { LayerPrefetcher, type LoadEvent } from './layer-prefetcher.js';
import { MicroBatchScheduler, type ComputeEvent } from './micro-batch-scheduler.js';
import { expectedDistinctExperts, expertReadShare } from './model-shape.js';
import type { Tier } from './placement.js';
import type { Policy } from './policy.js';
import { TieredEmbedding } from './tiered-embedding.js';
import { TieredKvCache, type KvCacheStats } from './tiered-kv-cache.js';
import { WeightTierStore, type HeadKey, type TierSummary } from './weight-tier-store.js';

/** Counters of the schedule, for benchmarks and reports. Times in milliseconds. */
export interface OffloadStats extends KvCacheStats {
  /** Layer weight loads (host conversions and disk reads, each counted from start to ready). */
  weightLoads: number;
  /** Loads of a streamed output head (its `ioMs` is counted with the layers'). */
  headLoads: number;
  /** Experts of sparse layers read on their own, once the router chose them (decode steps). */
  expertLoads: number;
  ioMs: number;
  /** Time inside the backend's layer and head calls (including handing it the streamed weights). */
  computeMs: number;
  /** Time the schedule waited for weights that were not ready when their layer came up. */
  stallMs: number;
  /** Time the schedule waited for a micro-batch's KV cache that was not loaded when its turn came. */
  cacheStallMs: number;
  /** Wall time with any I/O running (weight loads, cache loads and stores; overlapping ones counted once). */
  ioBusyMs: number;
  /** Bytes of hidden states written to and read back from disk (activations' home on disk). */
  activationDiskBytes: number;
  diskBytesRead: number;
  /** The part of `diskBytesRead` that is embedding rows gathered from the disk tier. */
  embeddingDiskBytes: number;
  /** Time spent in disk reads alone (part of ioMs). */
  diskReadMs: number;
}

export interface OffloadingBackendOptions {
  /** Folder for the disk tier (a subfolder per engine is created inside and removed on dispose). */
  offloadDir?: string;
  /** O_DIRECT reads of the disk tier (default true). */
  direct?: boolean;
  /**
   * Called at each schedule event, in order (tests and profiling): weight loads and per-micro-batch layer calls. A
   * streamed output head's load is reported as layer `numHiddenLayers` (FlexLLMGen's OutputEmbed, after the last layer).
   */
  trace?: (event: ScheduleEvent) => void;
  /**
   * How a mixture of experts' sparse layers stream: `auto` (default) reads only the routed experts in steps expected to
   * choose few of them; `whole-layers` always reads every expert (layer-by-layer offloading: the baseline of
   * `bench:offload`'s MoE cases).
   */
  experts?: 'auto' | 'whole-layers';
}

export type ScheduleEvent = LoadEvent | ComputeEvent;

/**
 * The kinds offloading's own parts are right for; the compute backend refuses at its `init` those it does not compute,
 * so what an offloaded model may use is the intersection (the compute backend's kinds, as far as these reach). The
 * weight tiers stream whatever tensors the description lists (four norms, q/k norms, split fused projections), the KV
 * tiers hold `kvHeads × headDim` per token of every position (a window is the compute backend's mask), and
 * `TieredEmbedding` computes the embedding: its learned position table and its scale. A kind added later is refused
 * here until these parts are checked for it.
 */
export const OFFLOADED_KINDS: readonly ModelKind[] = [
  'norm:layernorm', 'norm:rmsnorm', 'norm:rmsnorm-plus-one',
  'placement:pre', 'placement:post', 'placement:post-branch', 'placement:pre-and-post-branch',
  'positions:learned', 'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope',
  'attention:scale', 'attention:logit-softcap', 'attention:window', 'attention:window-even-layers', 'attention:qk-norm',
  'mlp:relu', 'mlp:gelu', 'mlp:swiglu', 'mlp:geglu-tanh', 'mlp:moe', 'mlp:moe-shared-expert', 'mlp:moe-dense-layers',
  'embedding:scale', 'head:logit-softcap',
];


/** The parts an initialised backend is made of (see the class comment). */
interface Parts {
  model: ModelDescription;
  store: WeightTierStore;
  prefetcher: LayerPrefetcher;
  scheduler: MicroBatchScheduler;
  activations: ActivationHome;
}

/**
 * FlexLLMGen's offloading as a wrapper around a compute backend (spec §3–§5, §11), wired from parts with one job
 * each: `WeightTierStore` places each layer object's tensors on the compute, host and disk tiers and reads a
 * streamed one back to fp32; `LayerPrefetcher` hands streamed weights to the inner backend's `StreamedLayers` in
 * schedule order and loads the next while the current layer computes; `MicroBatchScheduler` runs a batch larger than
 * `gpuBatchSize` as micro-batches over one load of each layer's weights; `TieredKvCache` keeps each batch's cache on
 * its tiers; `TieredEmbedding` and `ActivationHome` do the same for the input embedding and the hidden states.
 */
export class OffloadingBackend implements DecoderBackend {
  readonly name: string;
  readonly stats: OffloadStats = {
    weightLoads: 0,
    headLoads: 0,
    expertLoads: 0,
    ioMs: 0,
    computeMs: 0,
    stallMs: 0,
    diskBytesRead: 0,
    embeddingDiskBytes: 0,
    diskReadMs: 0,
    cacheStallMs: 0,
    ioBusyMs: 0,
    activationDiskBytes: 0,
    cacheLoadMs: 0,
    cacheStoreMs: 0,
    cacheDiskBytesRead: 0,
    cacheDiskBytesWritten: 0,
  };
  private readonly streaming: StreamedLayers;
  /** The inner backend's native logits arithmetic, when it has one. */
  readonly logitsMath?: LogitsMath;
  private readonly clock = new IoClock((ms) => (this.stats.ioBusyMs += ms));
  private parts?: Parts;
  private diskDir?: string;
  /** The InputEmbed object on its tiers (computed here, never loaded into the inner backend); undefined for opt-350m. */
  private embedding?: TieredEmbedding;
  private activeCache?: TieredKvCache;
  private cachesMade = 0;
  /** Routing statistics: per step token count, the mean distinct experts a sparse layer's visit read. */
  private readonly routing = new Map<number, { visits: number; experts: number }>();
  /** The current step's tokens, and per sparse layer the distinct experts its visit has read so far. */
  private stepTokens = 0;
  private readonly visitExperts = new Map<number, number>();

  constructor(
    private readonly inner: DecoderBackend,
    readonly policy: Policy,
    private readonly options: OffloadingBackendOptions = {},
  ) {
    this.name = `offload(${inner.name})`;
    this.logitsMath = inner.logitsMath;
    if (!inner.streamedLayers) throw new Error(`backend ${inner.name} cannot stream layer weights (it has no streamedLayers capability)`);
    this.streaming = inner.streamedLayers;
    const cacheDisk = 100 - policy.cacheGpuPercent - policy.cacheCpuPercent;
    if (cacheDisk > 0 && !options.offloadDir) throw new Error(`the policy puts ${cacheDisk}% of the KV cache on disk; pass an offload folder (--offload-dir)`);
    if (policy.actGpuPercent + policy.actCpuPercent === 0 && !options.offloadDir) throw new Error('the policy puts the activations on disk; pass an offload folder (--offload-dir)');
    const weightDisk = 100 - policy.wGpuPercent - policy.wCpuPercent;
    if (weightDisk > 0 && !options.offloadDir) throw new Error(`the policy puts ${weightDisk}% of the weights on disk; pass an offload folder (--offload-dir)`);
  }

  /** The inner backend's own load phases (FLEXHELM_TIMINGS): its resident layers load through it. */
  get loadTimings(): PhaseTotals | undefined {
    return this.inner.loadTimings;
  }

  private get p(): Parts {
    if (!this.parts) throw new Error('offload: init() was not called');
    return this.parts;
  }

  /** Any family: the tiers, the cache and the schedule are sized by the description's tensors and KV heads. */
  async init(model: ModelDescription): Promise<void> {
    requireKinds(model, 'offloading', OFFLOADED_KINDS);
    await this.inner.init(model);
    if (this.options.offloadDir) this.diskDir = join(this.options.offloadDir, `flexhelm-${process.pid}-${Date.now().toString(36)}`);
    const direct = this.options.direct ?? true;
    const trace = this.options.trace;
    const store = new WeightTierStore(model, this.policy, this.stats, this.diskDir, direct);
    const prefetcher = new LayerPrefetcher(store, this.streaming, this.inner.streamedHead, this.stats, this.clock, trace);
    prefetcher.onExpertsAsked = (layer, experts) => this.visitExperts.set(layer, experts);
    this.parts = {
      model,
      store,
      prefetcher,
      scheduler: new MicroBatchScheduler(this.inner, this.policy, model.layers, model.hiddenSize, kvValuesPerToken(model) / 2, this.stats, trace, this.inner.inPlaceKv),
      activations: new ActivationHome(this.policy, this.diskDir, direct, this.clock, this.stats),
    };
  }

  /**
   * The ends the inner backend holds from its own source (a GGUF file's token table and head blocks): they stay in it,
   * as they are stored, whatever the weight percents — the tiers would hold f16 roundings of the table the blocks
   * stand for, and the inner backend keeps its head resident (it streams none) — so the engine reads neither.
   */
  ownEndWeights(): ReadonlySet<OwnEndWeight> {
    const own = this.inner.ownEndWeights?.() ?? new Set<OwnEndWeight>();
    return new Set([...own].filter((end) => end === 'tokens' || (end === 'lmHead' && this.headPlacement() === undefined)));
  }

  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    // opt-350m's project_in is a matrix product, and a token table the inner backend holds itself (given empty):
    // the embedding stays in the compute backend.
    if (weights.projectIn || weights.tokens.length === 0) return this.inner.loadEmbedding(weights);
    const embedding = new TieredEmbedding(this.p.model, this.policy, this.diskDir, this.options.direct ?? true);
    await embedding.load(weights);
    this.embedding = embedding;
  }

  /** The tier of each layer tensor (FlexLLMGen's `init_weight_list` per layer object). */
  placement(): Map<string, Tier> {
    return this.p.store.placement();
  }

  /** The tier of each OutputEmbed tensor (`[ln_w, ln_b, tok]`, FlexLLMGen's order), or undefined if it cannot stream. */
  headPlacement(): Map<HeadKey, Tier> | undefined {
    return this.p.store.headPlacement(this.inner.streamedHead !== undefined);
  }

  async loadHead(weights: HeadWeights): Promise<void> {
    const placed = await this.p.store.placeHead(weights, this.inner.streamedHead !== undefined);
    if (placed.streamed) await this.inner.streamedHead!.load(placed.resident);
    else await this.inner.loadHead(placed.weights);
  }

  /**
   * The inner backend's own matrices of layer `index` (a GGUF file's blocks), when it can hand them over for the tiers
   * (`StreamedLayers.ownTensors`): the engine then reads no widened copy of them, resident or streamed.
   */
  ownLayerWeights(index: number): ReadonlySet<string> {
    return this.streaming.ownTensors ? (this.inner.ownLayerWeights?.(index) ?? new Set()) : new Set();
  }

  async loadLayer(index: number, weights: LayerTensors): Promise<void> {
    // A streamed layer's own matrices go to the tiers in the inner backend's stored form; a resident one's it takes
    // itself (its loadLayer, from its own source).
    const owned = this.streaming.ownTensors && this.p.store.streams(index) ? await this.streaming.ownTensors(index) : {};
    const placed = await this.p.store.placeLayer(index, weights, owned);
    if (placed.streamed) await this.streaming.loadLayer(index, placed.resident);
    else await this.inner.loadLayer(index, placed.weights);
  }

  /** Bytes and tensor counts per tier, and how many layers stream. */
  summary(): TierSummary {
    const s = this.p.store.summary();
    s.endsInBackend = this.ownEndWeights().has('tokens');
    if (this.embedding) {
      for (const tier of ['compute', 'host', 'disk'] as const) s.bytes[tier] += this.embedding.bytes[tier];
      s.tensors[this.embedding.tiers.tokens]++;
      if (this.embedding.tiers.positions) s.tensors[this.embedding.tiers.positions]++;
    }
    return s;
  }

  async embed(ids: Int32Array, positions: Int32Array, batch: number, seq: number): Promise<Float32Array> {
    this.p.store.endLoading();
    this.p.prefetcher.startStep();
    const embedding = this.embedding;
    if (!embedding) return this.inner.embed(ids, positions, batch, seq);
    const before = embedding.diskBytesRead;
    // Rows gathered from host RAM or disk are I/O too (the compute-tier gather is a copy).
    const hidden = await (embedding.offCompute ? this.clock.track(() => embedding.embed(ids, positions)) : embedding.embed(ids, positions));
    this.stats.diskBytesRead += embedding.diskBytesRead - before;
    this.stats.embeddingDiskBytes += embedding.diskBytesRead - before;
    return hidden;
  }

  setStep(step: StepShape): Promise<void> {
    this.foldRouting();
    this.stepTokens = step.batch * step.seq;
    this.p.prefetcher.expertsOnDemand = this.expertsOnDemand(this.stepTokens);
    return this.p.scheduler.setStep(step);
  }

  /**
   * The distinct experts a sparse layer's visit is expected to read for a step of `tokens` tokens: measured over the
   * steps of that size so far, else as if each token picked its top-k uniformly, `E·(1 − (1 − k/E)^tokens)`.
   */
  expectedExperts(tokens: number): number | undefined {
    const moe = this.p.model.moe;
    if (!moe) return undefined;
    const seen = this.routing.get(tokens);
    return seen ? seen.experts / seen.visits : expectedDistinctExperts(moe, tokens);
  }

  /** Whether a step of `tokens` tokens reads sparse layers' experts on demand (`EXPERTS_ON_DEMAND_SHARE`). */
  private expertsOnDemand(tokens: number): boolean {
    const moe = this.p.model.moe;
    return moe !== undefined && this.options.experts !== 'whole-layers' && expertReadShare(moe, this.expectedExperts(tokens)!) < 1;
  }

  /** The last step's visits of sparse layers join the routing statistics of its token count. */
  private foldRouting(): void {
    if (this.visitExperts.size === 0) return;
    const seen = this.routing.get(this.stepTokens) ?? { visits: 0, experts: 0 };
    for (const n of this.visitExperts.values()) {
      seen.visits++;
      seen.experts += n;
    }
    this.routing.set(this.stepTokens, seen);
    this.visitExperts.clear();
  }

  /** Layer `index` with the past passed in (the plain cache): weights streamed in, micro-batches, activations' home. */
  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    await this.p.prefetcher.beforeLayer(index);
    const t0 = performance.now();
    try {
      const r = await this.p.scheduler.layer(index, hidden, past);
      return { hidden: await this.p.activations.place(r.hidden), present: r.present };
    } finally {
      this.stats.computeMs += performance.now() - t0;
    }
  }

  /**
   * Each batch's cache: on the tiers (`TieredKvCache`) when the policy keeps any of it off the compute tier in float32
   * (host or disk percent, or `compressCache`) or the inner backend computes in place (`inPlaceKv`: its compute-tier
   * micro-batches then grow in place, in the backend's KV dtype), else the plain float32 cache stepped through
   * `layer`. A newer batch run retires the previous tiered cache (the engine runs one batch at a time).
   */
  openKvCache(batch: number): BackendKvCache {
    const { model } = this.p;
    const layers = model.layers;
    const inPlace = this.inner.inPlaceKv;
    if (this.policy.cacheGpuPercent === 100 && !this.policy.compressCache && !inPlace) return new StagedKvCache(this, layers, kvValuesPerToken(model), batch);
    void this.activeCache?.close().catch(() => undefined);
    const { attention } = model;
    const cache = new TieredKvCache({
      policy: this.policy,
      layers,
      heads: attention.kvHeads,
      headDim: attention.headDim,
      batch,
      dir: this.diskDir ? join(this.diskDir, `kv-${this.cachesMade++}`) : undefined,
      direct: this.options.direct ?? true,
      stats: this.stats,
      clock: this.clock,
      inPlace,
    });
    this.activeCache = cache;
    return {
      forward: async (ids, positions, step) => {
        if (step.batch !== cache.batch) throw new Error(`offload: the KV cache holds ${cache.batch} rows, the step has ${step.batch}`);
        await this.setStep(step);
        let hidden = await this.embed(ids, positions, step.batch, step.seq);
        for (let i = 0; i < layers; i++) {
          await this.p.prefetcher.beforeLayer(i);
          hidden = await this.p.activations.place(await this.p.scheduler.tieredLayer(cache, i, hidden));
        }
        return hidden;
      },
      get bytes() {
        return cache.bytes;
      },
      close: async () => {
        if (this.activeCache === cache) this.activeCache = undefined;
        await cache.close();
      },
      // A shared prompt prefix is prefilled once only when its row can be repeated in place (the whole cache there).
      ...(cache.canExpandRows ? { expandRows: (rows: number) => cache.expandRows(rows) } : {}),
    };
  }

  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    await this.p.prefetcher.beforeHead();
    const t0 = performance.now();
    try {
      return await this.inner.head(hidden, rows);
    } finally {
      this.stats.computeMs += performance.now() - t0;
    }
  }

  async dispose(): Promise<void> {
    this.parts?.store.close();
    await this.parts?.prefetcher.settle();
    await this.activeCache?.close();
    await this.inner.dispose();
    if (this.diskDir) rmSync(this.diskDir, { recursive: true, force: true });
  }
}
