import { layerObjects, numel, placeWeights, planMemory, storageBytes, type MemoryPlan, type ModelShape, type Policy, type Workload } from '@flexhelm/offload';
import { shapeId, type BackendProfile, type HostProfile, type MachineProfile, type ShapeProfile } from './machine-profile.js';
import { interpolate } from './profile-machine.js';

/** The compute backends the profile times (the offloading backend wraps either). */
export type ComputePath = 'onnxruntime-fp32' | 'onednn-bf16';

export interface CostOptions {
  /** The compute backend (openEngine's choice from --compute-dtype): oneDNN bf16 for auto/bf16 where it is usable, else onnxruntime fp32. */
  backend?: ComputePath;
}

/** Time of one forward step of a block (all its micro-batches), and of its parts (milliseconds). */
export interface StepCost {
  /** Wall time of the step: embedding, every layer (I/O and compute overlapped, the slower sets each layer), head. */
  ms: number;
  /** Per decoder layer, resident and streamed layers separately (what the slower of I/O and compute gives). */
  residentLayerMs: number;
  streamedLayerMs: number;
  /** Loading one streamed layer: host-tier conversions and the disk read with its conversion. */
  loadMs: number;
  /** Computing one streamed layer for all micro-batches (weights hand-over, micro-batch copies, layer calls). */
  computeMs: number;
  embedMs: number;
  headMs: number;
}

export interface CostPrediction {
  path: 'direct' | 'offloaded';
  backend: string;
  block: number;
  prefill: StepCost;
  /** The decode step at the mean context length (attention grows linearly with the context, so this is the mean). */
  decode: StepCost;
  /** Prefill once plus genLen − 1 decode steps. */
  totalMs: number;
  /** FlexLLMGen's generation throughput: block · genLen / total time (tokens/s). */
  throughput: number;
  memory: MemoryPlan;
  /** Predicted peak resident memory of the process running it (the plan plus what the engine holds besides). */
  peakRssBytes: number;
  diskBytes: number;
  /** Streamed layers per step and bytes read from disk per step. */
  streamedLayers: number;
  diskBytesPerStep: number;
}

/** Where one layer's tensors live and what loading it costs in elements and bytes. */
export interface LayerPlacement {
  resident: boolean;
  hostElements: number;
  diskElements: number;
  diskBytes: number;
  /** fp32 bytes kept on the compute tier. */
  computeBytes: number;
  /** Bytes of host-tier storage (f16 or 4-bit). */
  hostBytes: number;
}

/** The midpoint-rule placement of one decoder layer under `policy` (every layer is placed alike). */
export function layerPlacement(shape: ModelShape, policy: Policy): LayerPlacement {
  const compress = policy.compressWeight ? policy.compWeightConfig : undefined;
  const objects = layerObjects({ ...shape, numLayers: 1 }).filter((o) => o.name.startsWith('attention_') || o.name.startsWith('mlp_'));
  const p: LayerPlacement = { resident: true, hostElements: 0, diskElements: 0, diskBytes: 0, computeBytes: 0, hostBytes: 0 };
  for (const obj of objects) {
    const tiers = placeWeights(obj.tensors, policy.wGpuPercent, policy.wCpuPercent);
    obj.tensors.forEach((t, i) => {
      const n = numel(t.shape);
      if (tiers[i] === 'compute') p.computeBytes += 4 * n;
      else if (tiers[i] === 'host') {
        p.resident = false;
        p.hostElements += n;
        p.hostBytes += storageBytes(t.shape, compress);
      } else {
        p.resident = false;
        p.diskElements += n;
        // One file per layer, each tensor at a 4 KiB boundary (OffloadingBackend's layout).
        p.diskBytes += Math.ceil(storageBytes(t.shape, compress) / 4096) * 4096;
      }
    });
  }
  // 4-bit weights on the compute tier are stored dequantized (fp32), so they cost the same.
  return p;
}

/** The layer profile for this shape and backend, or an error saying what to profile. */
export function backendProfile(profile: MachineProfile, shape: ModelShape, backend: string): BackendProfile {
  const id = shapeId({ hiddenSize: shape.hiddenSize, ffnDim: shape.ffnDim, numHeads: shape.numHeads, vocabSize: shape.vocabSize, wordEmbedProjDim: shape.wordEmbedProjDim ?? shape.hiddenSize });
  const s: ShapeProfile | undefined = profile.shapes[id];
  const b = s?.backends[backend];
  if (!b) throw new Error(`the machine profile has no ${backend} figures for this model's shapes (${id}); run \`flexhelm profile --model …\` for it`);
  return b;
}

const median = (xs: { median: number }[]) => xs.map((x) => x.median);

/** Embedding, decoder-layer and head costs at given rows, from a backend profile (milliseconds). */
export class LayerCosts {
  constructor(readonly b: BackendProfile) {}
  /** The linear part of a layer call at `rows`, excluding the worker round trip. */
  linear(rows: number, streamed: boolean): number {
    const ys = streamed && this.b.streamedMs ? median(this.b.streamedMs) : median(this.b.residentMs);
    return Math.max(0, interpolate(this.b.rows, ys, rows) - this.b.roundTripMs.median);
  }
  /** `owned`: the backend holds the KV cache (unoffloaded engine steps), so only the new K/V cross per step. */
  attention(batch: number, seq: number, past: number, owned = false): number {
    if (seq > 1) return this.b.prefillAttnMsPerRowToken2 * batch * seq * (past + seq);
    const perRowToken = owned ? (this.b.ownedDecodeAttnMsPerRowToken ?? this.b.decodeAttnMsPerRowToken) : this.b.decodeAttnMsPerRowToken;
    return perRowToken * batch * (past + 1);
  }
  /** One layer call: round trip, linear layers, attention. */
  call(batch: number, seq: number, past: number, streamed: boolean, owned = false): number {
    return this.b.roundTripMs.median + this.linear(batch * seq, streamed) + this.attention(batch, seq, past, owned);
  }
  head(rows: number): number {
    return interpolate(this.b.headRows, median(this.b.headMs), rows);
  }
  embed(rows: number): number {
    return this.b.roundTripMs.median + this.b.embedMsPerRow * rows;
  }
}

/** Milliseconds to load one streamed layer: host conversions next to the disk read and its conversion. */
export function loadMs(p: LayerPlacement, host: HostProfile, compress: boolean): number {
  if (p.resident) return 0;
  const convGps = compress ? host.dequant4Gps.median : host.f16ToF32Gps.median;
  const conv = (n: number) => n / (convGps * 1e9) * 1000;
  const disk = p.diskBytes > 0 ? p.diskBytes / ((host.diskReadGBs?.median ?? 0.5) * 1e9) * 1000 + conv(p.diskElements) : 0;
  // Conversions use the CPU's cores together; the disk read waits on the device. Both run at once.
  return Math.max(conv(p.hostElements + p.diskElements), disk);
}

/**
 * One step of a block of `gbs · ngb` rows feeding `seq` tokens each after `past` cached ones, as OffloadingBackend
 * schedules it: per streamed layer the next layer loads while this one computes its micro-batches.
 */
export function stepCost(shape: ModelShape, policy: Policy, profile: MachineProfile, seq: number, past: number, options: CostOptions = {}): StepCost & { path: 'direct' | 'offloaded'; backend: string } {
  const g = policy.gpuBatchSize;
  const B = g * policy.numGpuBatches;
  const h = shape.hiddenSize;
  const L = shape.numLayers;
  const direct = policy.wGpuPercent === 100 && !policy.compressWeight;
  const backend = options.backend ?? 'onnxruntime-fp32';
  const costs = new LayerCosts(backendProfile(profile, shape, backend));
  const rt = costs.b.roundTripMs.median;
  const embedMs = costs.embed(B * seq);
  const headMs = costs.head(B);
  if (direct) {
    // forwardStack: every layer in one worker request, one batch of B rows.
    const layer = costs.call(B, seq, past, false, true) - rt;
    return { path: 'direct', backend: costs.b.backend, ms: rt + embedMs + L * layer + headMs, residentLayerMs: layer, streamedLayerMs: 0, loadMs: 0, computeMs: 0, embedMs, headMs };
  }
  const placement = layerPlacement(shape, policy);
  const copyMsPerByte = 1 / (profile.host.copyGBs.median * 1e6);
  const T = past + seq;
  const micro = (streamed: boolean): number => {
    if (B <= g) return costs.call(B, seq, past, streamed);
    let ms = 0;
    for (let b0 = 0; b0 < B; b0 += g) {
      const rows = Math.min(g, B - b0);
      // setStep per micro-batch (its mask slice), copies of its hidden and past rows, and its results set back.
      const bytes = 4 * (rows * seq * T + 2 * rows * seq * h + 2 * rows * past * h + 2 * rows * T * h);
      ms += rt + bytes * copyMsPerByte + costs.call(rows, seq, past, streamed);
    }
    return ms;
  };
  const residentLayerMs = micro(false);
  const load = loadMs(placement, profile.host, policy.compressWeight);
  const compute = placement.resident ? 0 : (costs.b.setWeightsMs?.median ?? 0) + micro(true);
  const streamedLayerMs = placement.resident ? 0 : Math.max(load, compute);
  const layerMs = placement.resident ? residentLayerMs : streamedLayerMs;
  const setStep = B <= g ? rt + 4 * B * seq * T * copyMsPerByte : 0;
  return { path: 'offloaded', backend: `offload(${costs.b.backend})`, ms: setStep + embedMs + L * layerMs + headMs, residentLayerMs, streamedLayerMs, loadMs: load, computeMs: compute, embedMs, headMs };
}

/**
 * Predicted peak RSS of a process running `policy`: the profiled floor (Node, onnxruntime, worker) plus what the
 * engine holds — compute-tier layer weights (fp32), host-tier copies, the fp32 token embedding and tied head (resident
 * on every policy: OffloadingBackend never streams them), KV cache, activations and workspace from `planMemory` — plus
 * what loading leaves for the garbage collector: each layer passes through fp32 arrays and an encoded graph (resident
 * layers) or fp32, f16 and file images (streamed layers), and about twelve resident or four streamed layers' worth of
 * them are still unreclaimed at the peak (fitted on opt-125m and opt-350m runs, see the benchmark).
 */
export function predictPeakRss(shape: ModelShape, policy: Policy, plan: MemoryPlan, baseRssBytes: number): number {
  const p = layerPlacement(shape, policy);
  const L = shape.numLayers;
  const e = shape.wordEmbedProjDim ?? shape.hiddenSize;
  const embedding = 4 * (shape.vocabSize * e + (shape.maxPositions + 2) * shape.hiddenSize + (e !== shape.hiddenSize ? 2 * e * shape.hiddenSize : 0));
  const head = 4 * shape.vocabSize * e;
  const layerFp32 = p.computeBytes + 4 * (p.hostElements + p.diskElements);
  const loadingGarbage = p.resident ? Math.min(L, 12) * layerFp32 : Math.min(L, 4) * (layerFp32 + p.diskBytes);
  const run = L * p.computeBytes + L * p.hostBytes + embedding + head + plan.cache.compute + plan.cache.host + plan.activations.compute + plan.activations.host + plan.workspace;
  return baseRssBytes + run + loadingGarbage;
}

/** Predicted time, throughput, memory and disk use of running one block of `policy` on `workload`. */
export function predictCost(shape: ModelShape, policy: Policy, workload: Workload, profile: MachineProfile, options: CostOptions = {}): CostPrediction {
  const s = workload.promptLen;
  const n = Math.max(1, workload.genLen);
  const prefill = stepCost(shape, policy, profile, s, 0, options);
  const decode = stepCost(shape, policy, profile, 1, s + (n - 2) / 2, options);
  const totalMs = prefill.ms + (n - 1) * decode.ms;
  const block = policy.gpuBatchSize * policy.numGpuBatches;
  const memory = planMemory(shape, policy, workload);
  const placement = layerPlacement(shape, policy);
  const streamedLayers = placement.resident ? 0 : shape.numLayers;
  return {
    path: prefill.path,
    backend: prefill.backend,
    block,
    prefill,
    decode,
    totalMs,
    throughput: (block * n) / (totalMs / 1000),
    memory,
    peakRssBytes: predictPeakRss(shape, policy, memory, profile.host.baseRssBytes),
    diskBytes: memory.diskBytes,
    streamedLayers,
    diskBytesPerStep: streamedLayers * placement.diskBytes,
  };
}
