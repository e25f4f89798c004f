import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { availableParallelism, freemem, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, ReferenceBackend, UnsupportedKindsError, kvValuesPerToken, type LayerTensors, type ModelDescription, type DecoderBackend, type TransposedLayerWeights } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { OneDnnBackend, oneDnnStatus, hasFastIsa } from '@flexhelm/onednn-backend';
import { allocPinned, dequantize4, f16ToF32, isNative, nativeFeatures, quantize4, readFile, writeFile } from '@flexhelm/pinned-memory';
import { interpolate, measured, timeMs, type BackendProfile, type HostProfile, type MachineKey, type Measured, type ShapeProfile } from '@flexhelm/cost-model';
import { profileDecode } from './profile-decode.js';
import { dummyLayerTensors, profileDescription, toShapeKey } from './profiled-model.js';

// 2: decode steps timed through the engine (BackendProfile.decode). 3: the cost model fitted to calibration runs (BackendProfile.fit).
export const PROFILE_SCHEMA = 3;

export interface ProfileOptions {
  /** Folder whose disk the disk tier uses (O_DIRECT probe files are written and removed there). */
  offloadDir?: string;
  /** Fewer rows, smaller probes, fewer repeats: a few seconds (tests, first use by `flexhelm run`). */
  quick?: boolean;
  /** Profile oneDNN bf16 too where it is usable (default true). */
  onednn?: boolean;
  /** Fit the cost model to calibration runs of the model's shape (default true; a minute or two per shape). */
  calibrate?: boolean;
  log?: (line: string) => void;
}

/** This machine's identity: CPU model and flags, cores, RAM, and the compute stack's versions. */
export function machineKey(): MachineKey {
  let cpuModel = 'unknown';
  let cpuFlags = '';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(info)?.[1]?.trim() ?? cpuModel;
    cpuFlags = (/^flags\s*:\s*(.+)$/m.exec(info)?.[1] ?? '').trim().split(/\s+/).sort().join(' ');
  } catch {
    // Not Linux: the model and core count still tell machines apart.
  }
  const backends: Record<string, string> = { onnxruntime: onnxruntimeVersion(), pinnedMemory: isNative ? `native${nativeFeatures ? `(${Object.entries(nativeFeatures).filter(([, v]) => v === true).map(([k]) => k).sort().join(',')})` : ''}` : 'js' };
  const status = oneDnnStatus();
  backends.onednn = status.available ? `${status.features.version} ${status.features.isa}` : 'none';
  return { cpuModel, cpuFlags, cores: availableParallelism(), totalRamBytes: totalmem(), backends, schema: PROFILE_SCHEMA };
}

function onnxruntimeVersion(): string {
  // The engine's own onnxruntime-node, found beside the engine package (its exports do not include package.json).
  let dir = dirname(fileURLToPath(import.meta.resolve('@flexhelm/engine')));
  for (;;) {
    const file = join(dir, 'node_modules', 'onnxruntime-node', 'package.json');
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
    if (dirname(dir) === dir) return 'unknown';
    dir = dirname(dir);
  }
}

/** Bytes free for new allocations (MemAvailable), or os.freemem() off Linux. */
export function availableRam(): number {
  try {
    const kb = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
    if (kb) return Number(kb) * 1024;
  } catch {
    // fall through
  }
  return freemem();
}

export function freeDiskAt(dir: string): number | undefined {
  try {
    const fs = statfsSync(dir);
    return fs.bavail * fs.bsize;
  } catch {
    return undefined;
  }
}

const GB = 1e9;

/** Host-tier and disk-tier speeds, and free RAM and disk. */
export async function profileHost(options: ProfileOptions = {}): Promise<HostProfile> {
  const quick = options.quick ?? false;
  const repeats = quick ? 3 : 5;
  const elements = quick ? 1 << 22 : 1 << 24;

  const src = new Float32Array(elements).map((_, i) => Math.sin(i));
  // Fresh arrays of a few MB, as the micro-batch schedule slices its KV rows (allocation included).
  const chunk = 1 << 20;
  const copyMs = await timeMs(() => {
    for (let at = 0; at < elements; at += chunk) src.slice(at, at + chunk);
  }, repeats);
  const copyGBs = rate(copyMs, (elements * 4) / GB);

  // Fresh 64 MiB arrays, written once: what a streamed tensor above 32 MiB costs besides its conversion.
  const freshBytes = 64 << 20;
  const freshMs = await timeMs(() => new Float32Array(freshBytes / 4).fill(1), quick ? 2 : 3, 0);
  const freshMsPerMB = { median: freshMs.median / (freshBytes / 1e6), min: freshMs.min / (freshBytes / 1e6), max: freshMs.max / (freshBytes / 1e6), samples: freshMs.samples };

  const f16 = new Uint16Array(elements).map((_, i) => 0x3c00 + (i % 1024));
  const dst = new Float32Array(elements);
  const f16Ms = await timeMs(() => f16ToF32(f16, dst), repeats);
  // Matrices as the engine stores them transposed ([in, out], groups along out = dim 1).
  const cols = 1024;
  const q = await quantize4(src, { shape: [elements / cols, cols], groupSize: 64, groupDim: 1 });
  const dqMs = await timeMs(() => dequantize4(q, { dst }), repeats);

  const host: HostProfile = {
    copyGBs,
    freshMsPerMB,
    f16ToF32Gps: rate(f16Ms, elements / GB),
    dequant4Gps: rate(dqMs, elements / GB),
    freeRamBytes: availableRam(),
    baseRssBytes: 0,
  };
  if (options.offloadDir) {
    try {
      mkdirSync(options.offloadDir, { recursive: true });
      const bytes = quick ? 32 << 20 : 256 << 20;
      const buf = await allocPinned(bytes);
      new Uint8Array(buf).fill(0x5a);
      const file = join(options.offloadDir, `flexhelm-profile-${process.pid}.bin`);
      try {
        host.diskWriteGBs = rate(await timeMs(() => writeFile(file, buf, { direct: true }), quick ? 2 : 3, 0), bytes / GB);
        host.diskReadGBs = rate(await timeMs(() => readFile(file, buf, { direct: true }), repeats), bytes / GB);
      } finally {
        rmSync(file, { force: true });
      }
      host.offloadDir = options.offloadDir;
      host.freeDiskBytes = freeDiskAt(options.offloadDir);
    } catch (err) {
      options.log?.(`profile: the offload folder ${options.offloadDir} could not be probed (${(err as Error).message}); disk-tier policies will not be considered`);
    }
  }
  host.baseRssBytes = baseRss();
  return host;
}

/** A throughput from a time: `amount` per second, with the times' spread carried over (min time → max rate). */
function rate(ms: Measured, amount: number): Measured {
  return { median: amount / (ms.median / 1000), min: amount / (ms.max / 1000), max: amount / (ms.min / 1000), samples: ms.samples };
}

/** Peak RSS of a fresh process that ran an engine with a tiny model (Node, onnxruntime, its worker): every run's floor. */
function baseRss(): number {
  // Beside this file in dist; from the sources (tests) the built copy in ../dist.
  const here = dirname(fileURLToPath(import.meta.url));
  const probe = existsSync(join(here, 'base-rss-probe.js')) ? join(here, 'base-rss-probe.js') : join(here, '..', 'dist', 'base-rss-probe.js');
  const r = spawnSync(process.execPath, [probe], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`profile: the memory probe failed (exit ${r.status}): ${r.stderr.trim().split('\n').pop()}`);
  return (JSON.parse(r.stdout.trim()) as { rss: number }).rss;
}

export { toShapeKey };

/** Any family's layer: two FLOPs per weight of its Linear layers (GQA's narrower k/v, SwiGLU's three matrices). */
const layerFlopsPerRow = (d: ModelDescription): number => 2 * d.layerTensors.reduce((a, t) => a + (t.shape.length === 2 ? t.shape[0]! * t.shape[1]! : 0), 0);

/**
 * Times one backend's decoder layer, head and embedding at the model's shapes on a two-layer dummy model of its own
 * family (OPT's LayerNorm/ReLU layer, or the Llama family's RMSNorm, grouped-query attention and SwiGLU): layer 0
 * resident, layer 1 streamed (weights as inputs) when the backend can stream. The dummy's token table is cut to
 * `profileVocab` rows; head and logits costs are scaled back to the model's vocabulary.
 */
export async function profileBackend(full: ModelDescription, make: () => DecoderBackend, options: ProfileOptions = {}): Promise<BackendProfile> {
  const quick = options.quick ?? false;
  const repeats = quick ? 3 : 5;
  const d = profileDescription(full, 2);
  const c = { numHiddenLayers: d.layers, maxPositionEmbeddings: d.maxPositions };
  const h = d.hiddenSize;
  // K (or V) values per cached token: grouped-query attention keeps only its KV heads.
  const kvRow = kvValuesPerToken(d) / 2;
  const engine = await Engine.dummy(d, { backend: make(), seed: 3 });
  const b = engine.backend;
  let result: BackendProfile;
  try {
    // Contexts within the model's positions (the timed decode steps after them need more).
    const pastLenForCache = Math.min(quick ? 256 : 512, c.maxPositionEmbeddings - repeats - 2);
    // Decode attention timed through the engine's own steps against the backend-held KV cache (only new K/V cross per
    // step): per-step time at a long and a short context, over both layers and all rows.
    let ownedDecodeAttnMsPerRowToken: number | undefined;
    {
      const rows = 8;
      const decodeStep = async (context: number) => {
        const run = engine.startBatch(rows);
        const ids = Array.from({ length: rows }, () => Array.from({ length: context }, (_, i) => 4 + (i % 500)));
        await run.step(ids, ids.map((r) => r.map(() => 1)));
        const times: number[] = [];
        for (let r = 0; r < repeats + 1; r++) {
          const t0 = performance.now();
          await run.step(ids.map(() => [7]), ids.map(() => [1]));
          if (r > 0) times.push(performance.now() - t0);
        }
        await run.close?.();
        return measured(times).median;
      };
      const short = await decodeStep(1);
      const long = await decodeStep(pastLenForCache);
      ownedDecodeAttnMsPerRowToken = Math.max(0, long - short) / (c.numHiddenLayers * rows * (pastLenForCache - 1));
    }
    let streamed: LayerTensors | undefined;
    if (b.streamedLayers) {
      const t = dummyLayerTensors(d, 1);
      const resident: LayerTensors = {};
      streamed = {};
      for (const { key, shape } of d.layerTensors) (shape.length === 1 ? resident : streamed)[key] = t[key]!;
      await b.streamedLayers.loadLayer(1, resident as Partial<TransposedLayerWeights>);
    }
    const copyStreamed = () => Object.fromEntries(Object.entries(streamed!).map(([k, v]) => [k, v.slice()])) as Partial<TransposedLayerWeights>;
    const layerCall = async (index: number, batch: number, seq: number, past: number) => {
      // Rotary layers read the step's positions; OPT's ignore them here.
      const positions = new Int32Array(batch * seq).map((_, i) => past + (i % seq));
      await b.setStep({ batch, seq, pastLen: past, maskBias: new Float32Array(batch * seq * (past + seq)), positions });
      const hidden = new Float32Array(batch * seq * h).fill(0.01);
      const kv = { k: new Float32Array(batch * past * kvRow), v: new Float32Array(batch * past * kvRow) };
      const t0 = performance.now();
      await b.layer(index, hidden, kv);
      return performance.now() - t0;
    };
    const timeLayer = async (index: number, batch: number, seq: number, past: number) => {
      const times: number[] = [];
      await layerCall(index, batch, seq, past);
      for (let r = 0; r < repeats; r++) times.push(await layerCall(index, batch, seq, past));
      return measured(times);
    };

    // Rows up to where one call takes ~1 s (prefill-sized batches are extrapolated linearly from the largest).
    const grid = quick ? [1, 4, 16, 64, 256] : [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];
    const rows: number[] = [];
    const residentMs: Measured[] = [];
    const streamedMs: Measured[] = [];
    for (const m of grid) {
      const res = await timeLayer(0, m, 1, 0);
      rows.push(m);
      residentMs.push(res);
      if (streamed) {
        await b.streamedLayers!.setLayer(1, copyStreamed());
        streamedMs.push(await timeLayer(1, m, 1, 0));
      }
      if (res.median > 1000) break;
    }
    // The hand-over alone: the copies it is given are made before the clock starts (the engine's come from conversion).
    let setWeightsMs: Measured | undefined;
    if (streamed) {
      const times: number[] = [];
      for (let r = 0; r < repeats + 1; r++) {
        const weights = copyStreamed();
        const t0 = performance.now();
        await b.streamedLayers!.setLayer(1, weights);
        if (r > 0) times.push(performance.now() - t0);
      }
      setWeightsMs = measured(times);
    }
    const linAt = (m: number) => interpolate(rows, residentMs.map((x) => x.median), m);

    const pastLen = pastLenForCache;
    const decodeBatch = 8;
    const dec = await timeLayer(0, decodeBatch, 1, pastLen);
    const decodeAttnMsPerRowToken = Math.max(0, dec.median - linAt(decodeBatch)) / (decodeBatch * (pastLen + 1));
    // Prefill attention: one long prompt against short ones of the same rows, so the GEMMs cancel (a difference with the
    // interpolated linear cost was mostly noise and over-predicted long prompts).
    const promptLen = Math.min(quick ? 256 : 512, d.maxPositions);
    const shortLen = 16;
    const pre = await timeLayer(0, 1, promptLen, 0);
    const shortRows = Math.max(1, Math.floor(promptLen / shortLen));
    const preShort = await timeLayer(0, shortRows, shortLen, 0);
    const prefillAttnMsPerRowToken2 = Math.max(0, pre.median - preShort.median * (promptLen / (shortRows * shortLen))) / (promptLen * promptLen - promptLen * shortLen);

    const headRows = quick ? [1, 16] : [1, 8, 64];
    const headMs: Measured[] = [];
    for (const r of headRows) headMs.push(await timeMs(() => b.head(new Float32Array(r * h).fill(0.01), r), repeats));
    const embedRows = quick ? 64 : 512;
    const ids = new Int32Array(embedRows).fill(5);
    const positions = new Int32Array(embedRows).map((_, i) => 2 + (i % 64));
    const embedMs = await timeMs(() => b.embed(ids.slice(), positions.slice(), embedRows, 1), repeats);
    const roundTripMs = await timeMs(() => b.embed(new Int32Array([5]), new Int32Array([2]), 1, 1), repeats * 2);

    const perRow = layerFlopsPerRow(d);
    result = {
      backend: b.name,
      rows,
      residentMs,
      ...(streamed ? { streamedMs, setWeightsMs } : {}),
      linearGflops: rows.map((m, i) => (perRow * m) / (residentMs[i]!.median / 1000) / 1e9),
      decodeAttnMsPerRowToken,
      ...(ownedDecodeAttnMsPerRowToken !== undefined ? { ownedDecodeAttnMsPerRowToken } : {}),
      prefillAttnMsPerRowToken2,
      headRows,
      headMs,
      embedMsPerRow: Math.max(0, embedMs.median - roundTripMs.median) / embedRows,
      roundTripMs,
    };
  } finally {
    await engine.close();
  }
  result.decode = await profileDecode(d, make, {
    quick,
    offloadDir: options.offloadDir,
    embedMsPerRow: result.embedMsPerRow,
    roundTripMs: result.roundTripMs.median,
  });
  return scaleHeadCosts(result, d.vocabSize, full.vocabSize);
}

/**
 * Head, logits and per-row sampling costs timed at `profiled` vocabulary rows, scaled to `vocab` rows (each is a pass
 * over the table or the logits, linear in the vocabulary; the worker round trip in a call is not). `k` < 1 undoes it.
 */
export function scaleHeadCosts(b: BackendProfile, profiled: number, vocab: number): BackendProfile {
  if (profiled === vocab) return b;
  const k = vocab / profiled;
  const rt = b.roundTripMs.median;
  const call = (m: Measured): Measured => {
    const f = (x: number) => Math.max(0, x - rt) * k + rt;
    return { median: f(m.median), min: f(m.min), max: f(m.max), samples: m.samples };
  };
  const d = b.decode;
  return {
    ...b,
    headMs: b.headMs.map(call),
    profileVocab: k > 1 ? profiled : undefined,
    ...(d
      ? {
          decode: {
            ...d,
            logitsMs: d.logitsMs.map(call),
            sampleMsPerRow: d.sampleMsPerRow * k,
            ...(d.streamedLogitsMs ? { streamedLogitsMs: d.streamedLogitsMs.map(call) } : {}),
          },
        }
      : {}),
  };
}

/** Layer costs at the model's shapes (its own family's layer) for every usable backend: onnxruntime fp32, and oneDNN bf16 where it is fast. */
export async function profileShape(d: ModelDescription, options: ProfileOptions = {}): Promise<ShapeProfile> {
  const backends: Record<string, BackendProfile> = {};
  options.log?.(`profile: onnxruntime fp32 ${d.family} layers at ${d.name}'s shapes (hidden ${d.hiddenSize}, ffn ${d.mlp.intermediateSize}${d.attention.kvHeads !== d.attention.heads ? `, ${d.attention.kvHeads} KV heads` : ''})…`);
  try {
    backends['onnxruntime-fp32'] = await profileBackend(d, () => new OrtBackend(), options);
  } catch (err) {
    // A family onnxruntime does not compute yet runs on the reference backend (the session's fallback): time that,
    // under the fp32 path the cost model reads, so the search plans for what will run.
    if (!(err instanceof UnsupportedKindsError)) throw err;
    options.log?.(`profile: ${err.message.split(';')[0]}; timing the reference backend, which computes it, instead…`);
    backends['onnxruntime-fp32'] = await profileBackend(d, () => new ReferenceBackend(), options);
  }
  const status = oneDnnStatus();
  if ((options.onednn ?? true) && status.available && hasFastIsa(status.features).fast) {
    options.log?.('profile: oneDNN bf16 layers…');
    try {
      backends['onednn-bf16'] = await profileBackend(d, () => new OneDnnBackend({ dtype: 'bf16' }), options);
    } catch (err) {
      // Without a oneDNN entry the cost model takes the fp32 path, as the session does for a family oneDNN refuses.
      if (!(err instanceof UnsupportedKindsError)) throw err;
      options.log?.(`profile: ${err.message.split(';')[0]}; no oneDNN timings for this shape`);
    }
  }
  return { shape: toShapeKey(d), backends };
}
