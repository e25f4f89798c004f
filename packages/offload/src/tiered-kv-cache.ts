import { join } from 'node:path';
import type { InPlaceKv, InPlaceKvLayers, KvDtype, KvPair } from '@flexhelm/engine';
import { dequantize4, f16ToF32, f32ToF16, quantize4 } from '@flexhelm/pinned-memory';
import { CacheStreamIo, type CacheStream } from './cache-stream-io.js';
import type { IoClock } from './io-clock.js';
import { kvCapacityFor } from './kv-capacity.js';
import { splitCacheSequences, type Tier } from './placement.js';
import type { Policy } from './policy.js';

/** Counters of the cache traffic (milliseconds and bytes), summed over every cache of a backend. */
export interface KvCacheStats {
  /** Time from a micro-batch's cache load start to its past K/V being ready (reads, conversions, transposes). */
  cacheLoadMs: number;
  /** Time of the stores (conversion or quantisation of the new rows, appends to RAM or disk). */
  cacheStoreMs: number;
  cacheDiskBytesRead: number;
  cacheDiskBytesWritten: number;
}

export interface TieredKvCacheOptions {
  policy: Policy;
  layers: number;
  heads: number;
  headDim: number;
  batch: number;
  /** Folder for the disk tier's files (created on first use, removed by close). */
  dir?: string;
  direct: boolean;
  stats: KvCacheStats;
  /** Counts the loads and stores as I/O time. */
  clock: IoClock;
  /**
   * The compute backend's in-place KV capability: with it, a micro-batch whose whole cache is on the compute tier
   * without compression keeps it in place (see the class comment). Without it every segment takes loads and stores.
   */
  inPlace?: InPlaceKvLayers;
}

/** The sequences `first … first+rows` of one micro-batch whose cache lives on one tier. */
interface Segment {
  tier: Tier;
  first: number;
  rows: number;
  tokens: number;
  /** Compute tier without compression: the float32 `[rows, heads, tokens, headDim]` the backend consumes. */
  f32?: KvPair;
  /**
   * An in-place segment (the whole micro-batch on the compute tier, the backend able to): `[rows, heads, capacity,
   * headDim]` buffers in the backend's KV dtype, allocated on the first step and grown with headroom.
   */
  inPlace?: { kv?: InPlaceKv; dtype?: KvDtype };
  streams: CacheStream[];
  /** The last store into this segment: loads wait for it (stores run behind the compute). */
  pending: Promise<void>;
}


/**
 * A batch's KV cache spread over the tiers by the policy's cache percents (FlexLLMGen spec §3.2): within each
 * micro-batch the first sequences keep theirs on the compute tier (float32, as the backend consumes it), the next on
 * the host tier and the rest on disk. Host and disk hold FlexLLMGen's storage form: f16, or with `compressCache` its
 * 4-bit groups along head_dim (spec §5; then every tier, the compute tier too, holds 4-bit). Disk files are read and
 * appended with O_DIRECT through @flexhelm/pinned-memory. Each (layer, micro-batch) has its own segments, so loads of
 * one micro-batch never alias another's (spec §4.3).
 *
 * In place: when the backend offers `InPlaceKvLayers` and a micro-batch's whole cache is on the compute tier without
 * compression, its segment is a `[rows, heads, capacity, headDim]` pair in the backend's KV dtype (bf16 for OPT's bf16
 * layers) that the layer writes its new tokens into (`inPlaceKv`); it has no loads or stores, and grows with headroom
 * (`kvCapacityFor`, one copy). A micro-batch split over tiers keeps loads and stores for all its rows: the layer runs
 * once per micro-batch over one K/V pair (splitting it would read the weights twice), and its outputs stay as before.
 */
export class TieredKvCache {
  private segments: Segment[][][]; // [layer][microBatch][segment]
  private microRows: number[] = [];
  /** Per micro-batch: its cache stays in place (the same for every layer). */
  private inPlaceRows: boolean[] = [];
  private rows: number;
  private closed = false;
  private readonly io: CacheStreamIo;
  /** Loads still running (a schedule may start them ahead and drop them): close waits for them before freeing. */
  private readonly loading = new Set<Promise<unknown>>();

  constructor(private readonly o: TieredKvCacheOptions) {
    this.io = new CacheStreamIo(o.dir, o.direct, o.stats);
    const diskShare = 100 - o.policy.cacheGpuPercent - o.policy.cacheCpuPercent;
    if (diskShare > 0 && !o.dir) throw new Error(`the policy puts ${diskShare}% of the KV cache on disk; pass an offload folder (--offload-dir)`);
    this.rows = o.batch;
    this.segments = this.build(o.batch);
  }

  /** Empty segments for `batch` rows: micro-batches of `gpuBatchSize`, each split over the tiers by the policy. */
  private build(batch: number): Segment[][][] {
    const g = this.o.policy.gpuBatchSize;
    this.microRows = [];
    for (let b0 = 0; b0 < batch; b0 += g) this.microRows.push(Math.min(g, batch - b0));
    const splits = this.microRows.map((rows) => splitCacheSequences({ ...this.o.policy, gpuBatchSize: rows }));
    this.inPlaceRows = splits.map((split, m) => this.o.inPlace !== undefined && !this.q4 && split.compute === this.microRows[m]);
    return Array.from({ length: this.o.layers }, (_, layer) =>
      splits.map((split, m) => {
        const out: Segment[] = [];
        let first = 0;
        for (const tier of ['compute', 'host', 'disk'] as const) {
          const n = split[tier];
          if (n === 0) continue;
          const inPlace = this.inPlaceRows[m] ? {} : undefined;
          out.push({ tier, first, rows: n, tokens: 0, streams: inPlace ? [] : this.streamsFor(tier, n, `L${layer}-m${m}-${tier}`), pending: Promise.resolve(), inPlace });
          first += n;
        }
        return out;
      }),
    );
  }

  get microBatches(): number {
    return this.microRows.length;
  }

  /** Rows of the batch (after `expandRows`, the expanded count). */
  get batch(): number {
    return this.rows;
  }

  /** Micro-batch `m` keeps its cache in place: its layers run through `inPlaceKv`, never `load` and `store`. */
  isInPlace(m: number): boolean {
    return this.inPlaceRows[m] ?? false;
  }

  /**
   * Micro-batch `m`'s in-place K/V of `layer` for a step of `seq` new tokens after `pastLen`, grown (one copy) when
   * it has no room for them. The caller's layer writes the new tokens now: the segment counts them as stored.
   */
  inPlaceKv(layer: number, m: number, pastLen: number, seq: number): InPlaceKv {
    const s = this.check(layer, m)[0]!;
    const backend = this.o.inPlace;
    if (!s.inPlace || !backend) throw new Error(`KV cache: layer ${layer} micro-batch ${m} is not kept in place (its cache is on the host or disk tier, or compressed)`);
    if (s.tokens !== pastLen) throw new Error(`KV cache: layer ${layer} micro-batch ${m} holds ${s.tokens} tokens but the step says ${pastLen} are cached`);
    const T = pastLen + seq;
    const old = s.inPlace.kv;
    if (!old || old.capacity < T) {
      s.inPlace.dtype ??= backend.kvDtype(layer);
      const dtype = s.inPlace.dtype;
      const capacity = kvCapacityFor(T);
      const R = s.rows * this.o.heads;
      const D = this.o.headDim;
      const grow = (from: InPlaceKv['k'] | undefined) => {
        const to = backend.allocKv(R * capacity * D, dtype);
        if (from && old) {
          // Each (row, head) keeps its first `pastLen` tokens at the new stride.
          for (let r = 0; r < R; r++) to.set(from.subarray(r * old.capacity * D, (r * old.capacity + pastLen) * D) as never, r * capacity * D);
          backend.freeKv(from);
        }
        return to;
      };
      s.inPlace.kv = { k: grow(old?.k), v: grow(old?.v), capacity };
    }
    s.tokens = T;
    return s.inPlace.kv!;
  }

  /**
   * Whether `expandRows` works: every micro-batch in place (the policy keeps the whole cache on the compute tier,
   * uncompressed, and the backend computes in place), so the one row's K/V can be repeated where they are.
   */
  get canExpandRows(): boolean {
    return this.o.inPlace !== undefined && !this.q4 && this.o.policy.cacheGpuPercent === 100;
  }

  /**
   * A cache of one row becomes `rows` rows that each hold a copy of that row's K/V (`BackendKvCache.expandRows`): the
   * micro-batches are laid out again for `rows` rows, each in-place segment filled with the row repeated.
   */
  async expandRows(rows: number): Promise<void> {
    if (this.closed) throw new Error('this KV cache was closed (its batch run ended or a newer batch run replaced it); start a new batch run');
    if (!this.canExpandRows) throw new Error('KV cache: expandRows needs the whole cache in place on the compute tier (cache percent 100 on the compute tier, uncompressed, a backend with in-place layers)');
    if (this.rows !== 1) throw new Error(`KV cache: expandRows needs a cache of one row, this one has ${this.rows}`);
    if (!Number.isInteger(rows) || rows < 1) throw new Error(`KV cache: expandRows takes a whole number of rows ≥ 1, got ${rows}`);
    const backend = this.o.inPlace!;
    const old = this.segments;
    this.segments = this.build(rows);
    this.rows = rows;
    for (let layer = 0; layer < this.o.layers; layer++) {
      const one = old[layer]![0]![0]!;
      const kv = one.inPlace?.kv;
      for (const [m, segs] of this.segments[layer]!.entries()) {
        const s = segs[0]!;
        s.tokens = one.tokens;
        if (!kv) continue;
        const dtype = one.inPlace!.dtype!;
        const repeat = (a: InPlaceKv['k']) => {
          const many = backend.allocKv(a.length * this.microRows[m]!, dtype);
          for (let r = 0; r < this.microRows[m]!; r++) many.set(a as never, r * a.length);
          return many;
        };
        s.inPlace = { dtype, kv: { k: repeat(kv.k), v: repeat(kv.v), capacity: kv.capacity } };
      }
      if (kv) {
        backend.freeKv(kv.k);
        backend.freeKv(kv.v);
      }
    }
  }

  private get q4(): boolean {
    return this.o.policy.compressCache;
  }

  private streamsFor(tier: Tier, rows: number, name: string): CacheStream[] {
    if (tier === 'compute' && !this.q4) return [];
    const R = rows * this.o.heads;
    const D = this.o.headDim;
    const file = (part: string) => (tier === 'disk' ? join(this.o.dir!, `${name}-${part}.bin`) : undefined);
    if (!this.q4) return ['k', 'v'].map((part) => ({ bytesPerToken: R * D * 2, file: file(part) }));
    const G = this.o.policy.compCacheConfig.groupSize;
    const groups = Math.ceil(D / G);
    // Codes two per byte over the padded group axis; (scale, min) as two f16 per group.
    return ['k', 'v'].flatMap((part) => [
      { bytesPerToken: (R * groups * G) / 2, file: file(`${part}-codes`) },
      { bytesPerToken: R * groups * 2 * 2, file: file(`${part}-scales`) },
    ]);
  }

  /** Bytes held in RAM as allocated: compute-tier float32, in-place buffers (their whole capacity), host-tier storage. */
  get bytes(): number {
    let n = 0;
    for (const layer of this.segments)
      for (const mb of layer)
        for (const s of mb) {
          if (s.f32) n += s.f32.k.byteLength + s.f32.v.byteLength;
          if (s.inPlace?.kv) n += s.inPlace.kv.k.byteLength + s.inPlace.kv.v.byteLength;
          for (const st of s.streams) n += st.host?.byteLength ?? 0;
        }
    return n;
  }

  private check(layer: number, m: number): Segment[] {
    if (this.closed) throw new Error('this KV cache was closed (its batch run ended or a newer batch run replaced it); start a new batch run');
    const segs = this.segments[layer]?.[m];
    if (!segs) throw new Error(`KV cache: no layer ${layer} micro-batch ${m}`);
    return segs;
  }

  /**
   * Micro-batch `m`'s past K and V of `layer` as float32 `[rows, heads, pastLen, headDim]` (fresh arrays the caller
   * may hand away), after any store still running into it.
   */
  load(layer: number, m: number, pastLen: number): Promise<KvPair> {
    const p = (async () => {
      const segs = this.check(layer, m);
      if (this.isInPlace(m)) throw new Error(`KV cache: layer ${layer} micro-batch ${m} is kept in place; use inPlaceKv, not load`);
      await Promise.all(segs.map((s) => s.pending));
      return this.o.clock.track(() => this.assemble(layer, m, segs, pastLen));
    })();
    this.loading.add(p);
    const done = () => void this.loading.delete(p);
    p.then(done, done);
    return p;
  }

  private async assemble(layer: number, m: number, segs: Segment[], pastLen: number): Promise<KvPair> {
    const started = performance.now();
    for (const s of segs) {
      if (s.tokens !== pastLen) throw new Error(`KV cache: layer ${layer} micro-batch ${m} holds ${s.tokens} tokens but the step says ${pastLen} are cached`);
    }
    const rows = this.microRows[m]!;
    const H = this.o.heads;
    const D = this.o.headDim;
    // The whole micro-batch on the compute tier in float32: hand the stored arrays over as they are (the new present replaces them).
    if (segs.length === 1 && segs[0]!.f32) {
      const { k, v } = segs[0]!.f32;
      segs[0]!.f32 = undefined;
      this.o.stats.cacheLoadMs += performance.now() - started;
      return { k, v };
    }
    // Every value is written below: the segments partition the micro-batch's rows and each fills its rows' tokens.
    const k = this.kvArray(rows * H * pastLen * D);
    const v = this.kvArray(rows * H * pastLen * D);
    if (pastLen > 0) {
      await Promise.all(
        segs.map(async (s) => {
          const at = s.first * H * pastLen * D;
          const n = s.rows * H * pastLen * D;
          if (s.f32) {
            k.set(s.f32.k, at);
            v.set(s.f32.v, at);
            return;
          }
          await this.readSegment(s, pastLen, k.subarray(at, at + n), v.subarray(at, at + n));
        }),
      );
    }
    this.o.stats.cacheLoadMs += performance.now() - started;
    return { k, v };
  }

  /**
   * A float32 array of `n` values (contents undefined) for assembled K/V. From the backend's `allocKv` when it has one:
   * the array goes to its `layer` as the past (handed over), which takes it back into its pool for the present it
   * returns, and `store` gives that present back when done — so a decode step reuses warm buffers instead of
   * allocating (and zeroing, and collecting) two arrays the size of the whole past per layer.
   */
  private kvArray(n: number): Float32Array {
    if (n > 0 && this.o.inPlace) return this.o.inPlace.allocKv(n, 'fp32') as Float32Array;
    return new Float32Array(n);
  }

  /** Host or disk segment → float32 head-major K and V. */
  private async readSegment(s: Segment, P: number, kOut: Float32Array, vOut: Float32Array): Promise<void> {
    const R = s.rows * this.o.heads;
    const D = this.o.headDim;
    await this.io.read(s.streams, s.tier === 'disk', P, async (parts) => {
      if (!this.q4) {
        const [kBytes, vBytes] = parts as [Uint8Array, Uint8Array];
        // Token-major [P, R, D] f16 → head-major [R, P, D] float32 in one native pass (off the JS thread).
        const swap = { swap: { outer: P, inner: R } };
        await Promise.all([f16ToF32(asU16(kBytes), kOut, swap), f16ToF32(asU16(vBytes), vOut, swap)]);
        return;
      }
      const G = this.o.policy.compCacheConfig.groupSize;
      const groups = Math.ceil(D / G);
      const q = (codes: Uint8Array, scales: Uint8Array) => ({
        shape: [P, R, D],
        groupSize: G,
        groupDim: 2,
        packed: codes,
        packedShape: [P, R, (groups * G) / 2],
        scale: asU16(scales),
        scaleShape: [P, R, groups, 2],
      });
      const [kf, vf] = await Promise.all([dequantize4(q(parts[0]!, parts[1]!)), dequantize4(q(parts[2]!, parts[3]!))]);
      transposeTokensInto(kf, P, R, D, kOut);
      transposeTokensInto(vf, P, R, D, vOut);
    });
  }

  /**
   * Stores the new tokens of micro-batch `m`'s `present` (`[rows, heads, pastLen + seq, headDim]`) behind the compute:
   * returns at once, the conversion and the append run in the background and the next load of this segment waits
   * for them.
   */
  store(layer: number, m: number, present: KvPair, pastLen: number, seq: number): void {
    const segs = this.check(layer, m);
    if (this.isInPlace(m)) throw new Error(`KV cache: layer ${layer} micro-batch ${m} is kept in place; its layer wrote the new tokens already`);
    const T = pastLen + seq;
    const H = this.o.heads;
    const D = this.o.headDim;
    const rows = this.microRows[m]!;
    if (present.k.length !== rows * H * T * D) throw new Error(`KV cache: layer ${layer} micro-batch ${m} got ${present.k.length} values, expected ${rows * H * T * D}`);
    for (const s of segs) {
      const run = async () => {
        const started = performance.now();
        if (s.tokens !== pastLen) throw new Error(`KV cache: layer ${layer} micro-batch ${m} holds ${s.tokens} tokens, cannot append at ${pastLen}`);
        const from = s.first * H * T * D;
        const to = (s.first + s.rows) * H * T * D;
        if (!s.streams.length) {
          // Compute tier, float32: keep the present rows as the backend returned them.
          s.f32 = segs.length === 1 ? present : { k: present.k.slice(from, to), v: present.v.slice(from, to) };
        } else {
          const R = s.rows * H;
          const kNew = newTokens(present.k.subarray(from, to), R, T, pastLen, D);
          const vNew = newTokens(present.v.subarray(from, to), R, T, pastLen, D);
          let pieces: Uint8Array[];
          if (!this.q4) {
            const [k16, v16] = await Promise.all([f32ToF16(kNew), f32ToF16(vNew)]);
            pieces = [bytesOf(k16), bytesOf(v16)];
          } else {
            const opts = { shape: [seq, R, D], groupSize: this.o.policy.compCacheConfig.groupSize, groupDim: 2 };
            const [kq, vq] = await Promise.all([quantize4(kNew, opts), quantize4(vNew, opts)]);
            pieces = [kq.packed, bytesOf(kq.scale), vq.packed, bytesOf(vq.scale)];
          }
          await Promise.all(s.streams.map((st, i) => this.io.append(st, pastLen, pieces[i]!)));
        }
        s.tokens = T;
        this.o.stats.cacheStoreMs += performance.now() - started;
      };
      s.pending = s.pending.then(() => this.o.clock.track(run));
      // A failed store surfaces at the next load of this segment (or at close); never as an unhandled rejection.
      s.pending.catch(() => undefined);
    }
    // Once every segment has taken its new tokens, the present goes back to the backend's pool (`kvArray`), unless
    // the compute tier keeps it as it is (the whole micro-batch there in float32; a share of it is a copy).
    const backend = this.o.inPlace;
    if (backend && !(segs.length === 1 && segs[0]!.streams.length === 0)) {
      void Promise.all(segs.map((s) => s.pending)).then(
        () => {
          backend.freeKv(present.k);
          backend.freeKv(present.v);
        },
        () => undefined,
      );
    }
  }

  /** Waits for the stores still running, then frees the memory and deletes the files. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pending = this.segments.flatMap((l) => l.flatMap((mb) => mb.map((s) => s.pending)));
    await Promise.allSettled([...pending, ...this.loading]);
    this.loading.clear();
    for (const layer of this.segments)
      for (const mb of layer)
        for (const s of mb) {
          s.f32 = undefined;
          for (const st of s.streams) st.host = undefined;
          const kv = s.inPlace?.kv;
          if (kv && this.o.inPlace) {
            this.o.inPlace.freeKv(kv.k);
            this.o.inPlace.freeKv(kv.v);
            s.inPlace = {};
          }
        }
    this.io.close();
  }
}

const asU16 = (b: Uint8Array) => new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2);
const bytesOf = (a: Uint16Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** Head-major `[R, T, D]` → the token-major `[T − past, R, D]` rows of the new tokens. */
function newTokens(src: Float32Array, R: number, T: number, past: number, D: number): Float32Array {
  const S = T - past;
  const out = new Float32Array(S * R * D);
  for (let r = 0; r < R; r++) {
    for (let t = 0; t < S; t++) {
      const a = (r * T + past + t) * D;
      const b = (t * R + r) * D;
      for (let d = 0; d < D; d++) out[b + d] = src[a + d]!;
    }
  }
  return out;
}

/** Token-major `[P, R, D]` float32 → head-major `[R, P, D]` written into `out`. */
function transposeTokensInto(src: Float32Array, P: number, R: number, D: number, out: Float32Array): void {
  for (let t = 0; t < P; t++) {
    for (let r = 0; r < R; r++) {
      const a = (t * R + r) * D;
      const b = (r * P + t) * D;
      for (let d = 0; d < D; d++) out[b + d] = src[a + d]!;
    }
  }
}
