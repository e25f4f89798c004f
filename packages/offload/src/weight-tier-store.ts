import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { allLayerTensorSpecs, expertOfTensor, isGroup4Tensor, isOwnTensor, layerTensorsOf, type HeadWeights, type LayerTensors, type ModelDescription, type OwnTensor, type StreamedLayerTensors, type StreamedTensor } from '@flexhelm/engine';
import { allocPinned, dequantize4, f16ToF32, f32ToF16, quantize4, readFile, writeFile, type Quantized4 } from '@flexhelm/pinned-memory';
import { expertStagingSlots } from './memory-plan.js';
import { placeWeights, type Tier } from './placement.js';
import type { Policy } from './policy.js';
import { ArrayRecycler, StagingSlots } from './staging-slots.js';
import { homeBytes, pinnedOwn, pinnedQuantized, type DiskHome, type Home, type Placed, type TensorHomes } from './tensor-homes.js';

const ALIGN = 4096;
/** `Placed.data` of a matrix placed in the backend's own form. */
const NO_VALUES = new Float32Array(0);
const alignUp = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

/** FlexLLMGen's OutputEmbed object `[ln_w, ln_b, tok]` (the final LayerNorm only on pre-LN models; RMSNorm has no bias). */
export type HeadKey = 'finalLnW' | 'finalLnB' | 'lmHead';

/** Where the weights went: bytes per tier and how many tensors. */
export interface TierSummary {
  tensors: Record<Tier, number>;
  bytes: Record<Tier, number>;
  streamedLayers: number;
  residentLayers: number;
  /** Whether the output head streams from its tiers (else it is resident in the compute backend, counted as compute). */
  headStreamed: boolean;
  /** Tensors among them kept in the compute backend's own stored form (`OwnTensor`: a GGUF file's blocks). */
  ownTensors: number;
  /** The compute backend holds the token table and the head itself (its own source): not counted here. */
  endsInBackend?: boolean;
}

/**
 * A layer after placement: every tensor resident (the backend's ordinary layer), or the resident part of a streamed
 * one (the backend's own stored forms among it as they were given).
 */
export type PlacedLayer = { streamed: false; weights: LayerTensors } | { streamed: true; resident: Partial<Record<string, Float32Array | OwnTensor>> };

/** A streamed sparse layer's expert: its tensors, and its byte range of the layer's file (`bytes` 0: none on disk). */
interface ExpertHome {
  keys: string[];
  offset: number;
  bytes: number;
}

/** A layer's homes: streamed or resident; a sparse one's experts each on their own (the expert is the unit). */
type LayerHomes = TensorHomes<string> & { streamed: boolean; experts?: Map<number, ExpertHome>; denseBytes?: number };

/** A part of a layer object to read: the keys taken, and the byte range of its file they lie in. */
interface ReadPart {
  keys: (key: string) => boolean;
  offset: number;
  bytes: number;
  slots: StagingSlots;
}

/**
 * How the backend takes streamed weight matrices (`StreamedLayers.acceptsF16` / `acceptsGroup4`): f16 copies as they
 * are, 4-bit ones as they are; otherwise each is converted to fp32.
 */
export interface HandOver {
  f16?: boolean;
  group4?: boolean;
}

/** Disk-read counters the store adds to (the backend's stats). */
export interface DiskReadStats {
  diskBytesRead: number;
  diskReadMs: number;
}

/**
 * The weights' homes off the compute tier (spec §3): places each layer object's tensors by the midpoint rule —
 * compute-tier tensors go back to the caller to stay resident in the backend (fp32), host-tier tensors are kept as f16
 * (or 4-bit) copies in pinned memory, disk-tier tensors are written once to one file per object — and reads a
 * streamed object back to fp32 (host conversions and one O_DIRECT read, in parallel). Knows nothing of the schedule.
 */
export class WeightTierStore {
  private readonly layers: LayerHomes[] = [];
  private head?: TensorHomes<HeadKey>;
  private readonly headTiers: { tier: Tier; bytes: number }[] = [];
  private readonly slots = new StagingSlots();
  /**
   * Experts read on demand land here, a slot each (allocated as first needed): a step's chosen experts of a layer read
   * in parallel, and with f16 hand-over each stays in its slot until the layer is replaced.
   */
  private readonly expertSlots: StagingSlots;
  private readonly recycler = new ArrayRecycler();
  /** Scratch for the disk files' images while loading (dropped by `endLoading`). */
  private loadImage?: Uint8Array;

  constructor(
    private readonly model: ModelDescription,
    private readonly policy: Policy,
    private readonly stats: DiskReadStats,
    private readonly diskDir: string | undefined,
    private readonly direct: boolean,
  ) {
    this.expertSlots = new StagingSlots(expertStagingSlots(model));
  }

  /**
   * The tier of each tensor of layer `index`: FlexLLMGen's `init_weight_list` over each layer object (attention, MLP)
   * on its own. A sparse layer's expert is one unit of it (its three matrices share a tier), so the weight percents
   * count experts.
   */
  placement(index = 0): Map<string, Tier> {
    const specs = layerTensorsOf(this.model, index);
    const { wGpuPercent, wCpuPercent } = this.policy;
    const out = new Map<string, Tier>();
    for (const group of ['attention', 'mlp'] as const) {
      const objects = specs.filter((x) => x.group === group);
      const tiers = placeWeights(objects.map((x) => ({ name: x.key, shape: x.shape, unit: expertOfTensor(x.key) })), wGpuPercent, wCpuPercent);
      objects.forEach((x, i) => {
        out.set(x.key, tiers[i]!);
      });
    }
    return new Map(specs.map((s) => [s.key, out.get(s.key)!]));
  }

  /** The tier of each OutputEmbed tensor (FlexLLMGen's order), or undefined when the head cannot stream. */
  headPlacement(canStream: boolean): Map<HeadKey, Tier> | undefined {
    const d = this.model;
    // opt-350m's project_out, and a backend without head streaming, keep the head resident.
    if (d.embedding.dim !== d.hiddenSize || !canStream) return undefined;
    const specs: { name: HeadKey; shape: number[] }[] = [];
    if (d.norm.final) specs.push({ name: 'finalLnW', shape: [d.hiddenSize] });
    if (d.norm.final && d.norm.kind === 'layernorm') specs.push({ name: 'finalLnB', shape: [d.hiddenSize] });
    specs.push({ name: 'lmHead', shape: [d.vocabSize, d.hiddenSize] });
    const tiers = placeWeights(specs, this.policy.wGpuPercent, this.policy.wCpuPercent);
    return new Map(specs.map((t, i) => [t.name, tiers[i]!]));
  }

  /** Whether layer `index` would stream (any of its tensors off the compute tier). */
  streams(index: number): boolean {
    return [...this.placement(index).values()].some((tier) => tier !== 'compute');
  }

  /**
   * Places layer `index` (`[in, out]` tensors, as `DecoderBackend.loadLayer` gets them); 4-bit weights are stored and
   * computed as their dequantized values, vectors uncompressed. `owned`: the matrices the backend holds in a form of
   * its own (`StreamedLayers.ownTensors`, absent from `weights`), stored on their tiers as they are (never compressed).
   */
  async placeLayer(index: number, weights: LayerTensors, owned: Readonly<Record<string, OwnTensor>> = {}): Promise<PlacedLayer> {
    const placement = this.placement(index);
    const specs = layerTensorsOf(this.model, index);
    const group = this.policy.compWeightConfig.groupSize;
    const t = weights;
    for (const { key, shape } of specs) {
      if (owned[key]) continue;
      const n = shape.reduce((a, b) => a * b, 1);
      if (t[key]?.length !== n) throw new Error(`offload: layer ${index}'s ${key} holds ${t[key]?.length ?? 'no'} values; the ${this.model.name} description says [${shape.join(', ')}] (${n})`);
    }
    // Groups of `group` output rows: FlexLLMGen's group_dim 0 of [out, in], dim 1 of the transposed [in, out] copy.
    const quantized = new Map<string, Quantized4>();
    if (this.policy.compressWeight) {
      for (const { key, shape } of specs) {
        if (shape.length >= 2 && !owned[key]) quantized.set(key, await quantize4(t[key]!, { shape, groupSize: group, groupDim: 1 }));
      }
    }
    if ([...placement.values()].every((tier) => tier === 'compute')) {
      if (Object.keys(owned).length) throw new Error(`offload: layer ${index} stays resident; the backend takes its own matrices itself`);
      const plain: LayerTensors = { ...weights };
      for (const [key, q] of quantized) plain[key] = await dequantize4(q);
      this.layers[index] = { streamed: false, homes: new Map([...placement.keys()].map((k) => [k, { tier: 'compute' }])), fileBytes: 0 };
      return { streamed: false, weights: plain };
    }
    const tensors = [...placement].map(([key, tier]) => ({ key, tier, data: owned[key] ? NO_VALUES : t[key]!, q: quantized.get(key), own: owned[key] }));
    const placed = await this.placeTensors(tensors, `layer-${index}.bin`, expertOfTensor);
    const experts = placed.segments.size > 0 || specs.some((x) => expertOfTensor(x.key) !== undefined) ? new Map<number, ExpertHome>() : undefined;
    if (experts) {
      for (const { key } of specs) {
        const e = expertOfTensor(key);
        if (e === undefined) continue;
        const home = experts.get(e) ?? { keys: [], offset: 0, bytes: 0, ...placed.segments.get(e) };
        home.keys.push(key);
        experts.set(e, home);
      }
    }
    this.layers[index] = { streamed: true, homes: placed.homes, file: placed.file, fileBytes: placed.fileBytes, experts, denseBytes: placed.denseBytes };
    return { streamed: true, resident: placed.resident };
  }

  /**
   * FlexLLMGen's OutputEmbed, placed by the weight percents like a layer object. With `compressWeight` its table is
   * 4-bit on every tier (groups of vocabulary rows, group_dim 0), so every placement computes the same. Returns the
   * resident head, or the resident part of a streamed one.
   */
  async placeHead(weights: HeadWeights, canStream: boolean): Promise<{ streamed: false; weights: HeadWeights } | { streamed: true; resident: Partial<HeadWeights> }> {
    const d = this.model;
    // An empty table is the compute backend's own (it holds the head itself, resident): nothing to compress.
    const q = this.policy.compressWeight && weights.lmHead.length > 0 ? await quantize4(weights.lmHead, { shape: [d.vocabSize, d.embedding.dim], groupSize: this.policy.compWeightConfig.groupSize, groupDim: 0 }) : undefined;
    const placement = this.headPlacement(canStream);
    if (!placement || [...placement.values()].every((t) => t === 'compute')) {
      const resident: HeadWeights = { ...weights, lmHead: q ? await dequantize4(q) : weights.lmHead };
      for (const t of [resident.finalLnW, resident.finalLnB, resident.projectOut, resident.lmHead]) if (t) this.headTiers.push({ tier: 'compute', bytes: t.byteLength });
      return { streamed: false, weights: resident };
    }
    const tensors: Placed<HeadKey>[] = [...placement].map(([key, tier]) => ({
      key,
      tier,
      // The table is the input embedding's when tied: a resident copy is handed over (transferred), so copy it. An
      // untied head (lm_head.weight) is its own table, stored and streamed on its own.
      data: key === 'lmHead' && tier === 'compute' && !q && d.embedding.tiedHead ? weights.lmHead.slice() : weights[key]!,
      ...(key === 'lmHead' && q ? { q } : {}),
    }));
    const placed = await this.placeTensors(tensors, 'head.bin');
    for (const t of tensors) this.headTiers.push({ tier: t.tier, bytes: homeBytes(placed.homes.get(t.key)!, t.data.length) });
    this.head = placed;
    // The head has no own forms (nothing here is `own`): float32 only.
    return { streamed: true, resident: placed.resident as Partial<HeadWeights> };
  }

  /** Layers placed so far (resident and streamed). */
  get layerCount(): number {
    return this.layers.length;
  }

  isStreamed(index: number): boolean {
    return this.layers[index]?.streamed ?? false;
  }

  get headStreamed(): boolean {
    return this.head !== undefined;
  }

  /**
   * Streamed layer `index`'s non-resident tensors in fp32, or with `f16` its f16 weight matrices as they are stored: a
   * host tensor's pinned copy itself (lent: never written), a disk tensor's bytes in the staging slot it was read into
   * (the slot stays taken until every such array comes back through `recycle`). 4-bit tensors are dequantized to fp32.
   */
  readLayer(index: number, handOver: HandOver = {}, experts = true): Promise<StreamedLayerTensors> {
    const layer = this.layers[index]!;
    if (experts || !layer.experts) return this.readTensors(layer, handOver);
    // All but the experts: the tensors before the first expert's segment of the file.
    return this.readTensors(layer, handOver, { keys: (key) => expertOfTensor(key) === undefined, offset: 0, bytes: layer.denseBytes ?? layer.fileBytes, slots: this.slots });
  }

  /** Whether streamed layer `index` is sparse: its experts can be read on their own (`readExpert`). */
  hasExperts(index: number): boolean {
    return this.layers[index]?.experts !== undefined;
  }

  /** Expert `expert` of streamed sparse layer `index` (its tensors that are off the compute tier), as `readLayer` reads. */
  readExpert(index: number, expert: number, handOver: HandOver = {}): Promise<StreamedLayerTensors> {
    const home = this.layers[index]?.experts?.get(expert);
    if (!home) throw new Error(`offload: layer ${index} has no streamed expert ${expert}`);
    const keys = new Set(home.keys);
    return this.readTensors(this.layers[index]!, handOver, { keys: (key) => keys.has(key), offset: home.offset, bytes: home.bytes, slots: this.expertSlots });
  }

  /** Bytes of streamed sparse layer `index`'s expert `expert` off the compute tier (its host and disk homes). */
  expertBytes(index: number, expert: number): number {
    const layer = this.layers[index];
    const home = layer?.experts?.get(expert);
    if (!layer || !home) return 0;
    const sizes = this.tensorSizes();
    return home.keys.reduce((sum, key) => {
      const h = layer.homes.get(key)!;
      return sum + (h.tier === 'compute' ? 0 : homeBytes(h, sizes.get(key)!));
    }, 0);
  }

  /** The streamed head's non-resident tensors in fp32. */
  readHead(): Promise<Partial<HeadWeights>> {
    if (!this.head) throw new Error('offload: the output head is not streamed');
    return this.readTensors(this.head) as Promise<Partial<HeadWeights>>;
  }

  /**
   * Arrays the backend let go of (or a dropped read's): fp32 ones take later conversions (warm memory, not fresh); an
   * f16 view of a staging slot gives the slot back once its last view is back; a host tensor's f16 copy stays its home.
   */
  recycle(arrays: Iterable<StreamedTensor | undefined>): void {
    for (const a of arrays) {
      if (a instanceof Float32Array) this.recycler.give(a);
      else if (a instanceof Uint16Array) this.returnSlotView(a);
      // A disk tensor's codes lie in a staging slot (one view per tensor); a host tensor's are its pinned copy.
      else if (isGroup4Tensor(a)) this.returnSlotView(a.scale);
      else if (isOwnTensor(a)) this.returnSlotView(a.bytes);
    }
  }

  /** Weight matrices (rank ≥ 2) go over as f16; vectors (biases, norms) always as fp32. */
  private matrices?: Set<string>;
  private isMatrix(key: string): boolean {
    this.matrices ??= new Set(allLayerTensorSpecs(this.model).filter((t) => t.shape.length >= 2).map((t) => t.key));
    return this.matrices.has(key);
  }

  /** Staging slots whose f16 views were handed out: how many are still out, and the pool the slot goes back to. */
  private readonly slotViews = new Map<ArrayBuffer, { views: number; pool: StagingSlots }>();

  private returnSlotView(view: ArrayBufferView): void {
    const slot = view.buffer as ArrayBuffer;
    const out = this.slotViews.get(slot);
    if (out === undefined) return;
    if (out.views > 1) out.views--;
    else {
      this.slotViews.delete(slot);
      out.pool.release(slot);
    }
  }

  private sizes?: Map<string, number>;
  private tensorSizes(): Map<string, number> {
    this.sizes ??= new Map(allLayerTensorSpecs(this.model).map((x) => [x.key, x.shape.reduce((a, b) => a * b, 1)]));
    return this.sizes;
  }

  /** Loading is over: the files' image buffer goes. */
  endLoading(): void {
    this.loadImage = undefined;
  }

  close(): void {
    this.recycler.clear();
    this.loadImage = undefined;
  }

  /** Bytes and tensor counts per tier of the layers and the head, and how many layers stream. */
  summary(): TierSummary {
    const s: TierSummary = { tensors: { compute: 0, host: 0, disk: 0 }, bytes: { compute: 0, host: 0, disk: 0 }, streamedLayers: 0, residentLayers: 0, headStreamed: this.headStreamed, ownTensors: 0 };
    const sizes = this.tensorSizes();
    for (const layer of this.layers) {
      if (!layer) continue;
      if (layer.streamed) s.streamedLayers++;
      else s.residentLayers++;
      for (const [key, home] of layer.homes) {
        s.tensors[home.tier]++;
        if ((home.tier === 'compute' && home.ownBytes !== undefined) || (home.tier !== 'compute' && home.own)) s.ownTensors++;
        s.bytes[home.tier] += homeBytes(home, sizes.get(key)!);
      }
    }
    for (const { tier, bytes } of this.headTiers) {
      s.tensors[tier]++;
      s.bytes[tier] += bytes;
    }
    return s;
  }

  /**
   * Puts each tensor on its tier: compute tensors are returned as `resident` (dequantized when 4-bit), host tensors
   * become f16 (or 4-bit) copies in pinned memory, disk tensors are written to one file `name` in the offload folder
   * (each at a 4 KiB boundary, f16 or packed codes followed by f16 scales, so one O_DIRECT read brings them all in).
   * With `segmentOf`, the tensors it names a segment for (a sparse layer's experts) follow the others in the file, one
   * contiguous range a segment: `denseBytes` ends the rest, `segments` locates each (read on its own).
   */
  private async placeTensors<K extends string>(
    tensors: Placed<K>[],
    name: string,
    segmentOf: (key: K) => number | undefined = () => undefined,
  ): Promise<TensorHomes<K> & { resident: Partial<Record<K, Float32Array | OwnTensor>>; denseBytes: number; segments: Map<number, { offset: number; bytes: number }> }> {
    const homes = new Map<K, Home>();
    const resident: Partial<Record<K, Float32Array | OwnTensor>> = {};
    const onDisk: Placed<K>[] = [];
    const segments = new Map<number, { offset: number; bytes: number }>();
    let fileBytes = 0;
    let denseBytes = 0;
    // Disk tensors outside any segment first, then each segment's together.
    const ordered = [...tensors.filter((t) => segmentOf(t.key) === undefined), ...tensors.filter((t) => segmentOf(t.key) !== undefined).sort((a, b) => segmentOf(a.key)! - segmentOf(b.key)!)];
    for (const t of ordered) {
      const segment = segmentOf(t.key);
      if (segment !== undefined && !segments.has(segment) && t.tier === 'disk') segments.set(segment, { offset: fileBytes, bytes: 0 });
      const { key, tier, data, q, own } = t;
      if (tier === 'compute') {
        resident[key] = own ?? (q ? await dequantize4(q) : data);
        homes.set(key, own ? { tier: 'compute', ownBytes: own.bytes.byteLength } : { tier: 'compute' });
      } else if (tier === 'host') {
        if (own) homes.set(key, { tier: 'host', own: await pinnedOwn(own) });
        else if (q) homes.set(key, { tier: 'host', q4: await pinnedQuantized(q) });
        else homes.set(key, { tier: 'host', f16: await f32ToF16(data, new Uint16Array(await allocPinned(data.length * 2))) });
      } else {
        const offset = fileBytes;
        if (own) {
          homes.set(key, { tier: 'disk', offset, elements: 0, own: { format: own.format, bytes: own.bytes.byteLength } });
          fileBytes = alignUp(offset + own.bytes.byteLength);
        } else if (q) {
          const { packed, scale, ...meta } = q;
          homes.set(key, { tier: 'disk', offset, elements: data.length, q4: { ...meta, packedBytes: packed.byteLength, scaleLength: scale.length } });
          fileBytes = alignUp(offset + packed.byteLength + scale.byteLength);
        } else {
          homes.set(key, { tier: 'disk', offset, elements: data.length });
          fileBytes = alignUp(offset + data.length * 2);
        }
        onDisk.push(t);
        if (segment === undefined) denseBytes = fileBytes;
        else segments.get(segment)!.bytes = fileBytes - segments.get(segment)!.offset;
      }
    }
    if (fileBytes === 0) return { homes, resident, fileBytes, denseBytes, segments };
    // The file's image is built in one buffer reused by every layer while loading (converted straight into it), so
    // loading leaves no f16 copies and images behind for the garbage collector.
    if (!this.loadImage || this.loadImage.byteLength < fileBytes) this.loadImage = new Uint8Array(fileBytes);
    const image = this.loadImage;
    for (const { key, data, q, own } of onDisk) {
      const { offset } = homes.get(key) as DiskHome;
      if (own) image.set(own.bytes, offset);
      else if (q) {
        image.set(q.packed, offset);
        image.set(new Uint8Array(q.scale.buffer, q.scale.byteOffset, q.scale.byteLength), offset + q.packed.byteLength);
      } else await f32ToF16(data, new Uint16Array(image.buffer, offset, data.length));
    }
    mkdirSync(this.diskDir!, { recursive: true });
    const file = join(this.diskDir!, name);
    await writeFile(file, image.subarray(0, fileBytes));
    this.slots.bytes = Math.max(this.slots.bytes, fileBytes);
    for (const { bytes } of segments.values()) this.expertSlots.bytes = Math.max(this.expertSlots.bytes, bytes);
    return { homes, resident, file, fileBytes, denseBytes, segments };
  }

  /**
   * Host conversions and one disk read (into a pinned staging slot, then converted unless handed over as stored), all
   * in parallel.
   */
  private async readTensors<K extends string>(home: TensorHomes<K>, handOver: HandOver = {}, part?: ReadPart): Promise<Partial<Record<K, StreamedTensor>>> {
    const out: Partial<Record<K, StreamedTensor>> = {};
    const jobs: Promise<void>[] = [];
    for (const [key, h] of home.homes) {
      if (h.tier !== 'host' || (part && !part.keys(key))) continue;
      // The backend's own form goes back as it came (lent: the pinned copy, never written).
      if (h.own) {
        out[key] = h.own;
        continue;
      }
      // Lent as stored (never written): the pinned f16 copy, or the pinned 4-bit codes.
      if (handOver.f16 && h.f16 && this.isMatrix(key)) {
        out[key] = h.f16;
        continue;
      }
      if (handOver.group4 && h.q4 && this.isMatrix(key)) {
        out[key] = h.q4;
        continue;
      }
      const dst = this.recycler.take(h.q4 ? h.q4.shape.reduce((a, b) => a * b, 1) : h.f16!.length);
      jobs.push(
        (h.q4 ? dequantize4(h.q4, { dst }) : f16ToF32(h.f16!, dst)).then((a) => {
          out[key] = a;
        }),
      );
    }
    if (home.file && (!part || part.bytes > 0)) jobs.push(this.readFileTensors(home, out, handOver, part));
    try {
      await Promise.all(jobs);
    } catch (e) {
      // What did arrive goes back (an f16 read's slot with it): nobody gets this read's arrays.
      await Promise.allSettled(jobs);
      this.recycle(Object.values(out));
      throw e;
    }
    return out;
  }

  private async readFileTensors<K extends string>(home: TensorHomes<K>, out: Partial<Record<K, StreamedTensor>>, handOver: HandOver, part?: ReadPart): Promise<void> {
    const pool = part?.slots ?? this.slots;
    const start = part?.offset ?? 0;
    const bytes = part?.bytes ?? home.fileBytes;
    const slot = await pool.acquire();
    let views = 0;
    try {
      const readStart = performance.now();
      await readFile(home.file!, new Uint8Array(slot, 0, bytes), { direct: this.direct, offset: start });
      this.stats.diskReadMs += performance.now() - readStart;
      this.stats.diskBytesRead += bytes;
      const conversions: Promise<void>[] = [];
      for (const [key, stored] of home.homes) {
        if (stored.tier !== 'disk' || (part && !part.keys(key))) continue;
        // Offsets are the file's; the slot holds the range from `start`.
        const h = { ...stored, offset: stored.offset - start };
        if (h.own) {
          // Handed over in place (4 KiB aligned in the slot), as an f16 view is.
          out[key] = { format: h.own.format, bytes: new Uint8Array(slot, h.offset, h.own.bytes) };
          views++;
          continue;
        }
        if (h.q4) {
          const { packedBytes, scaleLength, ...meta } = h.q4;
          const q: Quantized4 = { ...meta, packed: new Uint8Array(slot, h.offset, packedBytes), scale: new Uint16Array(slot, h.offset + packedBytes, scaleLength) };
          if (handOver.group4 && this.isMatrix(key)) {
            // Handed over in place, as an f16 view is.
            out[key] = q;
            views++;
            continue;
          }
          conversions.push(
            dequantize4(q, { dst: this.recycler.take(h.elements) }).then((a) => {
              out[key] = a;
            }),
          );
        } else if (handOver.f16 && this.isMatrix(key)) {
          // Handed over in place: the slot is the layer's until the backend gives these views back.
          out[key] = new Uint16Array(slot, h.offset, h.elements);
          views++;
        } else {
          conversions.push(
            f16ToF32(new Uint16Array(slot, h.offset, h.elements), this.recycler.take(h.elements)).then((a) => {
              out[key] = a;
            }),
          );
        }
      }
      await Promise.all(conversions);
    } catch (e) {
      views = 0;
      throw e;
    } finally {
      if (views > 0) this.slotViews.set(slot, { views, pool });
      else pool.release(slot);
    }
  }
}
