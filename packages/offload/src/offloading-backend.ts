import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  headDim,
  layerTensorShapes,
  type BackendKvCache,
  transposeLayerWeights,
  type EmbeddingWeights,
  type HeadWeights,
  type KvPair,
  type LayerTensorKey,
  type LayerWeights,
  type OptBackend,
  type OptConfig,
  type StepShape,
  type TransposedLayerWeights,
} from '@flexhelm/engine';
import { allocPinned, dequantize4, f16ToF32, f32ToF16, quantize4, readFile, writeFile, type Quantized4 } from '@flexhelm/pinned-memory';
import { placeWeights, type Tier } from './placement.js';
import type { Policy } from './policy.js';
import { IoClock } from './io-clock.js';
import { TieredEmbedding } from './tiered-embedding.js';
import { TieredKvCache, type KvCacheStats } from './tiered-kv-cache.js';

const ALIGN = 4096;
const alignUp = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

/** A tensor's home copy on the host tier: f16 bit patterns or FlexLLMGen 4-bit groups. */
type HostHome = { tier: 'host'; f16?: Uint16Array; q4?: Quantized4 };
/** A tensor's home on the disk tier: a byte range of its layer's file (f16, or packed codes followed by f16 scales). */
type DiskHome = { tier: 'disk'; offset: number; elements: number; q4?: Omit<Quantized4, 'packed' | 'scale'> & { packedBytes: number; scaleLength: number } };
type Home = { tier: 'compute' } | HostHome | DiskHome;

/** A layer object's tensors off the compute tier: where each lives, and its disk file (one O_DIRECT read). */
interface TensorHomes<K extends string> {
  homes: Map<K, Home>;
  file?: string;
  fileBytes: number;
}

interface LayerHome extends TensorHomes<LayerTensorKey> {
  /** Every tensor on the compute tier: the backend's ordinary resident layer. */
  resident: boolean;
}

/** FlexLLMGen's OutputEmbed object `[ln_w, ln_b, tok]` (the final LayerNorm only on pre-LN models). */
type HeadKey = 'finalLnW' | 'finalLnB' | 'lmHead';

/** One tensor to place: its values (float32, in the layout the backend takes) and, with compression, its 4-bit form. */
interface Placed<K extends string> {
  key: K;
  tier: Tier;
  data: Float32Array;
  q?: Quantized4;
}

/** Counters of the schedule, for benchmarks and reports. Times in milliseconds. */
export interface OffloadStats extends KvCacheStats {
  /** Layer weight loads (host conversions and disk reads, each counted from start to ready). */
  weightLoads: number;
  /** Loads of a streamed output head (its `ioMs` is counted with the layers'). */
  headLoads: number;
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
  /** Time spent in disk reads alone (part of ioMs). */
  diskReadMs: number;
}

/** Where the weights went: bytes per tier and how many tensors. */
export interface TierSummary {
  tensors: Record<Tier, number>;
  bytes: Record<Tier, number>;
  streamedLayers: number;
  residentLayers: number;
  /** Whether the output head streams from its tiers (else it is resident in the compute backend, counted as compute). */
  headStreamed: boolean;
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
}

export type ScheduleEvent =
  | { kind: 'load-start' | 'load-end'; layer: number }
  | { kind: 'compute-start' | 'compute-end'; layer: number; microBatch: number };

const ATTENTION_KEYS = 10; // the first ten tensors form FlexLLMGen's attention object, the other six its MLP object

/**
 * FlexLLMGen's offloading as a wrapper around a compute backend (spec §3–§5, §11). Each layer object's tensors are
 * placed by the midpoint rule: compute-tier tensors stay resident in the backend (fp32), host-tier tensors are kept as
 * f16 (or 4-bit) copies in pinned memory, disk-tier tensors are written once to one file per layer in the offload
 * folder. Streamed layers are converted to fp32 just before their turn, and the next streamed layer is loaded while the
 * current one computes (I/O and conversion run in native threads, compute in the backend's worker). A batch larger than
 * `gpuBatchSize` runs as micro-batches that all reuse one load of each layer's weights: FlexLLMGen's block schedule.
 * The KV cache is passed per micro-batch (a workspace each, no shared buffer), so micro-batches never see each other's keys.
 */
export class OffloadingBackend implements OptBackend {
  readonly name: string;
  private config!: OptConfig;
  private readonly layers: LayerHome[] = [];
  private step?: StepShape;
  private readonly inFlight = new Map<number, Promise<Partial<TransposedLayerWeights>>>();
  private readonly freeSlots: ArrayBuffer[] = [];
  private readonly slotWaiters: ((slot: ArrayBuffer) => void)[] = [];
  private slotsMade = 0;
  private slotBytes = 0;
  private diskDir?: string;
  readonly stats: OffloadStats = {
    weightLoads: 0,
    headLoads: 0,
    ioMs: 0,
    computeMs: 0,
    stallMs: 0,
    diskBytesRead: 0,
    diskReadMs: 0,
    cacheStallMs: 0,
    ioBusyMs: 0,
    activationDiskBytes: 0,
    cacheLoadMs: 0,
    cacheStoreMs: 0,
    cacheDiskBytesRead: 0,
    cacheDiskBytesWritten: 0,
  };
  /**
   * Present when the policy keeps any of the KV cache off the compute tier in float32 (host or disk percent, or
   * `compressCache`): the engine then lets this backend own each batch's cache (`TieredKvCache`).
   */
  readonly openKvCache?: (batch: number) => BackendKvCache;
  private activeCache?: TieredKvCache;
  private readonly clock = new IoClock((ms) => (this.stats.ioBusyMs += ms));
  private cachesMade = 0;
  /** The output head's tensors off the compute tier, when it streams; undefined when it is resident in the backend. */
  private headHome?: TensorHomes<HeadKey>;
  /** Bytes and tiers of the head's tensors, for `summary()`. */
  private readonly headTiers: { tier: Tier; bytes: number }[] = [];
  private headInFlight?: Promise<Partial<HeadWeights>>;
  /** The streamed head's tensors are in the backend now (until the next layer's arrive). */
  private headSet = false;
  /** fp32 arrays the backend gave back (reclaimStreamedArrays), by length, for later conversions to write into. */
  private readonly freeArrays = new Map<number, Float32Array[]>();
  /** Scratch for the disk files' images while loading (dropped when the first step starts). */
  private loadImage?: Uint8Array;

  constructor(
    private readonly inner: OptBackend,
    readonly policy: Policy,
    private readonly options: OffloadingBackendOptions = {},
  ) {
    this.name = `offload(${inner.name})`;
    const cacheDisk = 100 - policy.cacheGpuPercent - policy.cacheCpuPercent;
    if (cacheDisk > 0 && !options.offloadDir) throw new Error(`the policy puts ${cacheDisk}% of the KV cache on disk; pass an offload folder (--offload-dir)`);
    if (policy.cacheGpuPercent < 100 || policy.compressCache) this.openKvCache = (batch) => this.newKvCache(batch);
    if (!inner.loadStreamedLayer || !inner.setStreamedWeights) throw new Error(`backend ${inner.name} cannot stream layer weights (it has no loadStreamedLayer/setStreamedWeights)`);
    if (policy.actGpuPercent + policy.actCpuPercent === 0 && !options.offloadDir) throw new Error('the policy puts the activations on disk; pass an offload folder (--offload-dir)');
    const weightDisk = 100 - policy.wGpuPercent - policy.wCpuPercent;
    if (weightDisk > 0 && !options.offloadDir) throw new Error(`the policy puts ${weightDisk}% of the weights on disk; pass an offload folder (--offload-dir)`);
  }

  async init(config: OptConfig): Promise<void> {
    this.config = config;
    await this.inner.init(config);
    if (this.options.offloadDir) {
      this.diskDir = join(this.options.offloadDir, `flexhelm-${process.pid}-${Date.now().toString(36)}`);
    }
  }

  /** The InputEmbed object on its tiers (computed here, never loaded into the inner backend); undefined for opt-350m. */
  private embedding?: TieredEmbedding;

  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    // opt-350m's project_in is a matrix product: its embedding stays in the compute backend.
    if (weights.projectIn) return this.inner.loadEmbedding(weights);
    const embedding = new TieredEmbedding(this.config, this.policy, this.diskDir, this.options.direct ?? true);
    await embedding.load(weights);
    this.embedding = embedding;
  }
  /** The tier of each OutputEmbed tensor (`[ln_w, ln_b, tok]`, FlexLLMGen's order), or undefined if it cannot stream. */
  headPlacement(): Map<HeadKey, Tier> | undefined {
    const c = this.config;
    // opt-350m's project_out, and a backend without the streamed-head hooks, keep the head resident.
    if (c.wordEmbedProjDim !== c.hiddenSize || !this.inner.loadStreamedHead || !this.inner.setStreamedHead) return undefined;
    const specs: { name: HeadKey; shape: number[] }[] = [];
    if (c.doLayerNormBefore) specs.push({ name: 'finalLnW', shape: [c.hiddenSize] }, { name: 'finalLnB', shape: [c.hiddenSize] });
    specs.push({ name: 'lmHead', shape: [c.vocabSize, c.hiddenSize] });
    const tiers = placeWeights(specs, this.policy.wGpuPercent, this.policy.wCpuPercent);
    return new Map(specs.map((t, i) => [t.name, tiers[i]!]));
  }

  /**
   * FlexLLMGen's OutputEmbed: placed by the weight percents like a layer object. With `compressWeight` its table is
   * 4-bit on every tier (groups of 64 vocabulary rows, FlexLLMGen's group_dim 0), so every placement computes the same.
   */
  async loadHead(weights: HeadWeights): Promise<void> {
    const c = this.config;
    const V = c.vocabSize;
    const e = c.wordEmbedProjDim;
    const q = this.policy.compressWeight ? await quantize4(weights.lmHead, { shape: [V, e], groupSize: this.policy.compWeightConfig.groupSize, groupDim: 0 }) : undefined;
    const placement = this.headPlacement();
    if (!placement || [...placement.values()].every((t) => t === 'compute')) {
      const resident: HeadWeights = { ...weights, lmHead: q ? await dequantize4(q) : weights.lmHead };
      for (const t of [resident.finalLnW, resident.finalLnB, resident.projectOut, resident.lmHead]) if (t) this.headTiers.push({ tier: 'compute', bytes: t.byteLength });
      return this.inner.loadHead(resident);
    }
    const tensors: Placed<HeadKey>[] = [...placement].map(([key, tier]) => ({
      key,
      tier,
      // The table is the input embedding's when tied: a resident copy is handed over (transferred), so copy it.
      data: key === 'lmHead' && tier === 'compute' && !q ? weights.lmHead.slice() : weights[key]!,
      ...(key === 'lmHead' && q ? { q } : {}),
    }));
    const placed = await this.placeTensors(tensors, 'head.bin');
    for (const t of tensors) this.headTiers.push({ tier: t.tier, bytes: this.homeBytes(placed.homes.get(t.key)!, t.data.length) });
    await this.inner.loadStreamedHead!(placed.resident);
    this.headHome = placed;
  }

  /** The tier of each of layer `index`'s tensors (FlexLLMGen's `init_weight_list` per layer object). */
  placement(): Map<LayerTensorKey, Tier> {
    const shapes = layerTensorShapes(this.config);
    const { wGpuPercent, wCpuPercent } = this.policy;
    const tiers = [
      ...placeWeights(shapes.slice(0, ATTENTION_KEYS).map((s) => ({ name: s.key, shape: s.shape })), wGpuPercent, wCpuPercent),
      ...placeWeights(shapes.slice(ATTENTION_KEYS).map((s) => ({ name: s.key, shape: s.shape })), wGpuPercent, wCpuPercent),
    ];
    return new Map(shapes.map((s, i) => [s.key, tiers[i]!]));
  }

  async loadLayer(index: number, weights: LayerWeights): Promise<void> {
    const c = this.config;
    const placement = this.placement();
    const compress = this.policy.compressWeight;
    const group = this.policy.compWeightConfig.groupSize;
    const t = transposeLayerWeights(c, weights);
    // 4-bit weights are stored and computed as their dequantized values (groups of `group` output rows, FlexLLMGen's
    // group_dim 0 of [out, in], which is dim 1 of the transposed [in, out] copy); vectors stay uncompressed.
    const quantized = new Map<LayerTensorKey, Quantized4>();
    if (compress) {
      for (const { key, shape } of layerTensorShapes(c)) {
        if (shape.length < 2) continue;
        quantized.set(key, await quantize4(t[key], { shape, groupSize: group, groupDim: 1 }));
      }
    }
    const allCompute = [...placement.values()].every((tier) => tier === 'compute');
    if (allCompute) {
      if (compress) {
        const plain: LayerWeights = { ...weights };
        for (const [key, q] of quantized) plain[key] = transposeBack(await dequantize4(q), q.shape);
        await this.inner.loadLayer(index, plain);
      } else await this.inner.loadLayer(index, weights);
      this.layers[index] = { resident: true, homes: new Map([...placement.keys()].map((k) => [k, { tier: 'compute' }])), fileBytes: 0 };
      return;
    }
    const tensors = layerTensorShapes(c).map(({ key }) => ({ key, tier: placement.get(key)!, data: t[key], q: quantized.get(key) }));
    const placed = await this.placeTensors(tensors, `layer-${index}.bin`);
    await this.inner.loadStreamedLayer!(index, placed.resident);
    this.layers[index] = { resident: false, homes: placed.homes, file: placed.file, fileBytes: placed.fileBytes };
  }

  /**
   * Puts each tensor on its tier: compute tensors are returned as `resident` (dequantized when 4-bit), host tensors
   * become f16 (or 4-bit) copies in pinned memory, disk tensors are written to one file `name` in the offload folder
   * (each at a 4 KiB boundary, f16 or packed codes followed by f16 scales, so one O_DIRECT read brings them all in).
   */
  private async placeTensors<K extends string>(tensors: Placed<K>[], name: string): Promise<TensorHomes<K> & { resident: Partial<Record<K, Float32Array>> }> {
    const homes = new Map<K, Home>();
    const resident: Partial<Record<K, Float32Array>> = {};
    const onDisk: Placed<K>[] = [];
    let fileBytes = 0;
    for (const t of tensors) {
      const { key, tier, data, q } = t;
      if (tier === 'compute') {
        resident[key] = q ? await dequantize4(q) : data;
        homes.set(key, { tier: 'compute' });
      } else if (tier === 'host') {
        if (q) homes.set(key, { tier: 'host', q4: await pinnedQuantized(q) });
        else homes.set(key, { tier: 'host', f16: await f32ToF16(data, new Uint16Array(await allocPinned(data.length * 2))) });
      } else {
        const offset = fileBytes;
        if (q) {
          const { packed, scale, ...meta } = q;
          homes.set(key, { tier: 'disk', offset, elements: data.length, q4: { ...meta, packedBytes: packed.byteLength, scaleLength: scale.length } });
          fileBytes = alignUp(offset + packed.byteLength + scale.byteLength);
        } else {
          homes.set(key, { tier: 'disk', offset, elements: data.length });
          fileBytes = alignUp(offset + data.length * 2);
        }
        onDisk.push(t);
      }
    }
    let file: string | undefined;
    if (fileBytes > 0) {
      // The file's image is built in one buffer reused by every layer while loading (converted straight into it), so
      // loading leaves no f16 copies and images behind for the garbage collector.
      if (!this.loadImage || this.loadImage.byteLength < fileBytes) this.loadImage = new Uint8Array(fileBytes);
      const image = this.loadImage;
      for (const { key, data, q } of onDisk) {
        const { offset } = homes.get(key) as DiskHome;
        if (q) {
          image.set(q.packed, offset);
          image.set(new Uint8Array(q.scale.buffer, q.scale.byteOffset, q.scale.byteLength), offset + q.packed.byteLength);
        } else await f32ToF16(data, new Uint16Array(image.buffer, offset, data.length));
      }
      mkdirSync(this.diskDir!, { recursive: true });
      file = join(this.diskDir!, name);
      await writeFile(file, image.subarray(0, fileBytes));
      this.slotBytes = Math.max(this.slotBytes, fileBytes);
    }
    return { homes, resident, file, fileBytes };
  }

  /** Bytes a tensor of `elements` values takes in its home (fp32 on the compute tier). */
  private homeBytes(home: Home, elements: number): number {
    if (home.tier === 'compute') return 4 * elements;
    if (home.tier === 'host') return home.q4 ? home.q4.packed.byteLength + home.q4.scale.byteLength : 2 * elements;
    return home.q4 ? home.q4.packedBytes + 2 * home.q4.scaleLength : 2 * elements;
  }

  /** Bytes and tensor counts per tier, and how many layers stream. */
  summary(): TierSummary {
    const s: TierSummary = { tensors: { compute: 0, host: 0, disk: 0 }, bytes: { compute: 0, host: 0, disk: 0 }, streamedLayers: 0, residentLayers: 0, headStreamed: this.headHome !== undefined };
    const sizes = new Map(layerTensorShapes(this.config).map((x) => [x.key, x.shape.reduce((a, b) => a * b, 1)]));
    if (this.embedding) {
      for (const tier of ['compute', 'host', 'disk'] as const) s.bytes[tier] += this.embedding.bytes[tier];
      s.tensors[this.embedding.tiers.tokens]++;
      s.tensors[this.embedding.tiers.positions]++;
    }
    for (const layer of this.layers) {
      if (!layer) continue;
      if (layer.resident) s.residentLayers++;
      else s.streamedLayers++;
      for (const [key, home] of layer.homes) {
        s.tensors[home.tier]++;
        s.bytes[home.tier] += this.homeBytes(home, sizes.get(key)!);
      }
    }
    for (const { tier, bytes } of this.headTiers) {
      s.tensors[tier]++;
      s.bytes[tier] += bytes;
    }
    return s;
  }

  private async acquireSlot(): Promise<ArrayBuffer> {
    const free = this.freeSlots.pop();
    if (free) return free;
    // Two slots: the layer being converted and the one being read ahead.
    if (this.slotsMade < 2) {
      this.slotsMade++;
      return allocPinned(this.slotBytes);
    }
    return new Promise((resolve) => this.slotWaiters.push(resolve));
  }
  private releaseSlot(slot: ArrayBuffer): void {
    const waiter = this.slotWaiters.shift();
    if (waiter) waiter(slot);
    else this.freeSlots.push(slot);
  }

  /** Brings the non-resident tensors of layer `index` to fp32 (host conversions and one disk read in parallel). */
  private fetchLayer(index: number): Promise<Partial<TransposedLayerWeights>> {
    return this.clock.track(() => this.readLayer(index));
  }

  private async readLayer(index: number): Promise<Partial<TransposedLayerWeights>> {
    const started = performance.now();
    this.options.trace?.({ kind: 'load-start', layer: index });
    const out = await this.readTensors(this.layers[index]!);
    this.options.trace?.({ kind: 'load-end', layer: index });
    this.stats.weightLoads++;
    this.stats.ioMs += performance.now() - started;
    return out;
  }

  /** Brings the streamed head's tensors to fp32, traced as layer `numHiddenLayers`. */
  private fetchHead(): Promise<Partial<HeadWeights>> {
    return this.clock.track(async () => {
      const started = performance.now();
      const L = this.config.numHiddenLayers;
      this.options.trace?.({ kind: 'load-start', layer: L });
      const out = await this.readTensors(this.headHome!);
      this.options.trace?.({ kind: 'load-end', layer: L });
      this.stats.headLoads++;
      this.stats.ioMs += performance.now() - started;
      return out;
    });
  }

  /** A returned array of `length` floats to convert into (warm memory), or undefined for a fresh one. */
  private reusedArray(length: number): Float32Array | undefined {
    return this.freeArrays.get(length)?.pop();
  }

  private giveArray(array: Float32Array): void {
    const list = this.freeArrays.get(array.length) ?? [];
    // A few per size: the schedule has at most a layer converting, one computing and one let go.
    if (list.length < 8) list.push(array);
    this.freeArrays.set(array.length, list);
  }

  /** Host conversions and one disk read (into a pinned staging slot, then converted), all in parallel. */
  private async readTensors<K extends string>(home: TensorHomes<K>): Promise<Partial<Record<K, Float32Array>>> {
    const out: Partial<Record<K, Float32Array>> = {};
    const jobs: Promise<void>[] = [];
    for (const [key, h] of home.homes) {
      if (h.tier !== 'host') continue;
      const dst = this.reusedArray(h.q4 ? h.q4.shape.reduce((a, b) => a * b, 1) : h.f16!.length);
      jobs.push((h.q4 ? dequantize4(h.q4, { dst }) : f16ToF32(h.f16!, dst)).then((a) => {
        out[key] = a;
      }));
    }
    if (home.file) {
      jobs.push(
        (async () => {
          const slot = await this.acquireSlot();
          try {
            const readStart = performance.now();
            await readFile(home.file!, new Uint8Array(slot, 0, home.fileBytes), { direct: this.options.direct ?? true });
            this.stats.diskReadMs += performance.now() - readStart;
            this.stats.diskBytesRead += home.fileBytes;
            const conversions: Promise<void>[] = [];
            for (const [key, h] of home.homes) {
              if (h.tier !== 'disk') continue;
              if (h.q4) {
                const { packedBytes, scaleLength, ...meta } = h.q4;
                const q: Quantized4 = { ...meta, packed: new Uint8Array(slot, h.offset, packedBytes), scale: new Uint16Array(slot, h.offset + packedBytes, scaleLength) };
                conversions.push(dequantize4(q, { dst: this.reusedArray(h.elements) }).then((a) => {
                  out[key] = a;
                }));
              } else conversions.push(f16ToF32(new Uint16Array(slot, h.offset, h.elements), this.reusedArray(h.elements)).then((a) => {
                out[key] = a;
              }));
            }
            await Promise.all(conversions);
          } finally {
            this.releaseSlot(slot);
          }
        })(),
      );
    }
    await Promise.all(jobs);
    return out;
  }

  /** The streamed layer after `index` in schedule order (wrapping to the next step), if any. */
  private nextStreamed(index: number): number | undefined {
    const L = this.layers.length;
    for (let d = 1; d <= L; d++) {
      const j = (index + d) % L;
      if (this.layers[j] && !this.layers[j]!.resident) return j;
    }
    return undefined;
  }

  private weightsFor(index: number): Promise<Partial<TransposedLayerWeights>> {
    const pending = this.inFlight.get(index);
    this.inFlight.delete(index);
    return pending ?? this.fetchLayer(index);
  }

  async embed(ids: Int32Array, positions: Int32Array, batch: number, seq: number): Promise<Float32Array> {
    this.loadImage = undefined;
    // The first streamed layer of this step starts loading while the embedding runs.
    const first = this.nextStreamed(this.layers.length - 1);
    if (first !== undefined && !this.inFlight.has(first)) this.inFlight.set(first, this.fetchLayer(first));
    if (!this.embedding) return this.inner.embed(ids, positions, batch, seq);
    const before = this.embedding.diskBytesRead;
    // Rows gathered from host RAM or disk are I/O too (the compute-tier gather is a copy).
    const hidden = await (this.embedding.offCompute ? this.clock.track(() => this.embedding!.embed(ids, positions)) : this.embedding.embed(ids, positions));
    this.stats.diskBytesRead += this.embedding.diskBytesRead - before;
    return hidden;
  }

  async setStep(step: StepShape): Promise<void> {
    this.step = step;
    if (step.batch <= this.policy.gpuBatchSize) await this.inner.setStep(step);
  }

  /** A batch's cache over the tiers; a newer batch run retires the previous one (the engine runs one batch at a time). */
  private newKvCache(batch: number): BackendKvCache {
    const previous = this.activeCache;
    if (previous) void previous.close().catch(() => undefined);
    const c = this.config;
    const cache = new TieredKvCache({
      policy: this.policy,
      layers: c.numHiddenLayers,
      heads: c.numAttentionHeads,
      headDim: headDim(c),
      batch,
      dir: this.diskDir ? join(this.diskDir, `kv-${this.cachesMade++}`) : undefined,
      direct: this.options.direct ?? true,
      stats: this.stats,
      clock: this.clock,
    });
    this.activeCache = cache;
    return {
      layer: (index, hidden) => this.cachedLayer(cache, index, hidden),
      get bytes() {
        return cache.bytes;
      },
      close: async () => {
        if (this.activeCache === cache) this.activeCache = undefined;
        await cache.close();
      },
    };
  }

  /** Waits for layer `index`'s streamed weights (if any), starts the next load, hands the weights over. */
  private async prepareWeights(index: number): Promise<void> {
    const layer = this.layers[index]!;
    if (layer.resident) return this.readAhead(index);
    const waitStart = performance.now();
    const weights = await this.weightsFor(index);
    this.stats.stallMs += performance.now() - waitStart;
    this.readAhead(index);
    const t0 = performance.now();
    await this.inner.setStreamedWeights!(index, weights);
    // Arrays of layers the backend has let go of come back for the next conversions (warm memory, not fresh).
    for (const array of this.inner.reclaimStreamedArrays?.() ?? []) this.giveArray(array);
    // The backend may free the head's streamed tensors as a layer's arrive (one streamed unit at a time).
    this.headSet = false;
    this.stats.computeMs += performance.now() - t0;
  }

  /**
   * Read ahead while layer `index` computes: after the last layer the streamed head (the head then starts the next
   * step's first layer), else the next streamed layer (wrapping to the next step).
   */
  private readAhead(index: number): void {
    if (index === this.layers.length - 1 && this.headHome) {
      if (!this.headSet && !this.headInFlight) this.headInFlight = this.fetchHead();
      return;
    }
    if (this.layers[index]!.resident) return;
    const next = this.nextStreamed(index);
    if (next !== undefined && !this.inFlight.has(next)) this.inFlight.set(next, this.fetchLayer(next));
  }

  /**
   * FlexLLMGen's overlapped multi-batch loop for one layer with the cache on the tiers (spec §4.3), read ahead one
   * micro-batch further: while micro-batch k computes, the caches of the next two (layer, micro-batch) slots in
   * schedule order load (wrapping to the next layer and to the next step's layer 0), so a cache read is issued a whole
   * micro-batch before it is needed and the disk never waits for the orchestration; k's new K/V are stored behind the
   * compute. Each slot has its own buffers (no aliasing, spec §4.3); at most three slots' K/V are in flight.
   */
  private async cachedLayer(cache: TieredKvCache, index: number, hidden: Float32Array): Promise<Float32Array> {
    const step = this.step;
    const layer = this.layers[index];
    if (!step || !layer) throw new Error(`offload: layer ${index} not loaded or setStep not called`);
    if (hidden.length !== step.batch * step.seq * this.config.hiddenSize) throw new Error(`offload: hidden holds ${hidden.length} values for a step of ${step.batch}×${step.seq}`);
    const loads = cache.ahead;
    const key = (j: number, m: number, pastLen: number) => `${j}.${m}.${pastLen}`;
    const take = (j: number, m: number) => {
      const p = loads.get(key(j, m, step.pastLen));
      loads.delete(key(j, m, step.pastLen));
      return p ?? cache.load(j, m, step.pastLen);
    };
    const prefetch = (slot: Slot | undefined) => {
      if (!slot || loads.has(key(...slot))) return;
      const p = cache.load(...slot);
      p.catch(() => undefined);
      loads.set(key(...slot), p);
    };
    const L = this.layers.length;
    const M = cache.microBatches;
    type Slot = [layer: number, microBatch: number, pastLen: number];
    // The slot after (j, m) in schedule order; past the next step's first layer nothing is known yet (its shape).
    const after = ([j, m, p]: Slot): Slot | undefined => {
      if (m + 1 < M) return [j, m + 1, p];
      if (j + 1 < L) return [j + 1, 0, p];
      return p === step.pastLen ? [0, 0, T] : undefined;
    };
    await this.prepareWeights(index);
    const g = this.policy.gpuBatchSize;
    const S = step.seq;
    const T = step.pastLen + S;
    const E = this.config.hiddenSize;
    const y = new Float32Array(step.batch * S * E);
    const t0 = performance.now();
    let pending = take(index, 0);
    for (let m = 0; m < M; m++) {
      const b0 = m * g;
      const b1 = Math.min(step.batch, b0 + g);
      const waitStart = performance.now();
      const past = await pending;
      this.stats.cacheStallMs += performance.now() - waitStart;
      // The next two slots. A slot of the next step waits for this step's store into it, so only one whose store is
      // already queued (not this micro-batch's or a later one's of this layer: a one-layer model).
      const next = after([index, m, step.pastLen]);
      for (const slot of [next, next && after(next)]) {
        if (slot && slot[2] !== step.pastLen && slot[0] === index && slot[1] >= m) continue;
        prefetch(slot);
      }
      if (m + 1 < M) pending = take(index, m + 1);
      await this.inner.setStep({ batch: b1 - b0, seq: S, pastLen: step.pastLen, maskBias: step.maskBias.slice(b0 * S * T, b1 * S * T) });
      this.options.trace?.({ kind: 'compute-start', layer: index, microBatch: m });
      const r = await this.inner.layer(index, hidden.slice(b0 * S * E, b1 * S * E), past);
      this.options.trace?.({ kind: 'compute-end', layer: index, microBatch: m });
      y.set(r.hidden, b0 * S * E);
      cache.store(index, m, r.present, step.pastLen, S);
    }
    this.stats.computeMs += performance.now() - t0;
    return this.toActivationHome(y);
  }

  /**
   * FlexLLMGen's store_hidden / load_hidden: with the activations' home on disk, each layer's output goes to a file
   * and comes back before the next layer (float32 both ways, so nothing changes but the I/O). Host and compute
   * activations are the same RAM here.
   */
  private async toActivationHome(hidden: Float32Array): Promise<Float32Array> {
    if (this.policy.actGpuPercent + this.policy.actCpuPercent > 0) return hidden;
    const file = join(this.diskDir!, 'activations.bin');
    return this.clock.track(async () => {
      mkdirSync(this.diskDir!, { recursive: true });
      const direct = this.options.direct ?? true;
      await writeFile(file, hidden, { offset: 0, direct });
      const back = new Float32Array(hidden.length);
      await readFile(file, back, { direct });
      this.stats.activationDiskBytes += 2 * hidden.byteLength;
      return back;
    });
  }

  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const step = this.step;
    const layer = this.layers[index];
    if (!step || !layer) throw new Error(`offload: layer ${index} not loaded or setStep not called`);
    await this.prepareWeights(index);
    const t0 = performance.now();
    try {
      const g = this.policy.gpuBatchSize;
      if (step.batch <= g) {
        this.options.trace?.({ kind: 'compute-start', layer: index, microBatch: 0 });
        const r = await this.inner.layer(index, hidden, past);
        this.options.trace?.({ kind: 'compute-end', layer: index, microBatch: 0 });
        return { hidden: await this.toActivationHome(r.hidden), present: r.present };
      }
      const r = await this.microBatches(index, step, hidden, past, g);
      return { hidden: await this.toActivationHome(r.hidden), present: r.present };
    } finally {
      this.stats.computeMs += performance.now() - t0;
    }
  }

  /** FlexLLMGen's inner loop over micro-batches of `g` rows, all with the weights loaded once for this layer. */
  private async microBatches(index: number, step: StepShape, hidden: Float32Array, past: KvPair, g: number): Promise<{ hidden: Float32Array; present: KvPair }> {
    const c = this.config;
    const S = step.seq;
    const T = step.pastLen + S;
    const E = c.hiddenSize;
    // K and V are [batch, heads, tokens, headDim] with heads·headDim = hidden.
    const pastRow = E * step.pastLen;
    const presentRow = E * T;
    const y = new Float32Array(step.batch * S * E);
    const k = new Float32Array(step.batch * presentRow);
    const v = new Float32Array(step.batch * presentRow);
    for (let b0 = 0; b0 < step.batch; b0 += g) {
      const b1 = Math.min(step.batch, b0 + g);
      const rows = b1 - b0;
      await this.inner.setStep({ batch: rows, seq: S, pastLen: step.pastLen, maskBias: step.maskBias.slice(b0 * S * T, b1 * S * T) });
      // Each micro-batch gets its own copies of its rows (its own KV workspace): nothing is shared between them.
      this.options.trace?.({ kind: 'compute-start', layer: index, microBatch: b0 / g });
      const r = await this.inner.layer(index, hidden.slice(b0 * S * E, b1 * S * E), { k: past.k.slice(b0 * pastRow, b1 * pastRow), v: past.v.slice(b0 * pastRow, b1 * pastRow) });
      this.options.trace?.({ kind: 'compute-end', layer: index, microBatch: b0 / g });
      y.set(r.hidden, b0 * S * E);
      k.set(r.present.k, b0 * presentRow);
      v.set(r.present.v, b0 * presentRow);
      if (r.present.k.length !== rows * presentRow) throw new Error(`offload: layer ${index} returned ${r.present.k.length} cache values for ${rows} rows, expected ${rows * presentRow}`);
    }
    return { hidden: y, present: { k, v } };
  }

  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    if (this.headHome && !this.headSet) {
      const waitStart = performance.now();
      const weights = await (this.headInFlight ?? this.fetchHead());
      this.headInFlight = undefined;
      this.stats.stallMs += performance.now() - waitStart;
      // Read ahead: the next step's first streamed layer loads while the head computes.
      const first = this.nextStreamed(this.layers.length - 1);
      if (first !== undefined && !this.inFlight.has(first)) this.inFlight.set(first, this.fetchLayer(first));
      const t0 = performance.now();
      await this.inner.setStreamedHead!(weights);
      this.headSet = true;
      this.stats.computeMs += performance.now() - t0;
    }
    const t0 = performance.now();
    try {
      return await this.inner.head(hidden, rows);
    } finally {
      this.stats.computeMs += performance.now() - t0;
    }
  }

  async dispose(): Promise<void> {
    this.freeArrays.clear();
    await Promise.allSettled([...this.inFlight.values(), this.headInFlight]);
    this.inFlight.clear();
    this.headInFlight = undefined;
    await this.activeCache?.close();
    await this.inner.dispose();
    if (this.diskDir) rmSync(this.diskDir, { recursive: true, force: true });
  }
}

/** A 4-bit tensor's codes and scales copied into pinned memory (the host tier's home copy). */
async function pinnedQuantized(q: Quantized4): Promise<Quantized4> {
  const packed = new Uint8Array(await allocPinned(q.packed.byteLength));
  packed.set(q.packed);
  const scale = new Uint16Array(await allocPinned(q.scale.byteLength));
  scale.set(q.scale);
  return { ...q, packed, scale };
}

/** `[in, out]` → `[out, in]`. */
function transposeBack(a: Float32Array, shape: number[]): Float32Array {
  const [rows, cols] = shape as [number, number];
  const out = new Float32Array(a.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = a[r * cols + c]!;
  return out;
}
