import { attentionWidth, expectedDistinctExperts, expertReadShare, kvWidth, layerObjects, type TensorSpec, numel, placeWeights, planMemory, storageBytes, type MemoryPlan, type ModelShape, type PlanOptions, type Policy, type Workload } from '@flexhelm/offload/plan';
import { heldDecodeShare } from './held-decode-share.js';
import { ORT_CHUNK_TOKENS } from '@flexhelm/ort-backend';
import { shapeId, type ShapeKey, type BackendProfile, type HostProfile, type MachineProfile, type MemoryScales, type ShapeProfile, type TimeScales } from './machine-profile.js';
import { interpolate } from './interpolate.js';
import { microBatchBytes } from './micro-batch-bytes.js';

/** The compute backends the profile times (the offloading backend wraps either). */
export type ComputePath = 'onnxruntime-fp32' | 'onednn-bf16';

export interface CostOptions {
  /** The compute backend (openEngine's choice from --compute-dtype): oneDNN bf16 for auto/bf16 where it is usable, else onnxruntime fp32. */
  backend?: ComputePath;
  /** Scale factors to use instead of the profile's fitted ones (the fit itself tries candidates through this). */
  timeScales?: TimeScales;
  memoryScales?: MemoryScales;
}

/** The unfitted model: every term as measured, FlexLLMGen's max of load and compute. */
export const UNIT_TIME_SCALES: TimeScales = { directPrefill: 1, directDecode: 1, load: 1, prefillCompute: 1, decodeCompute: 1, headLoad: 1, freshLoad: 0, contention: 0 };
export const UNIT_MEMORY_SCALES: MemoryScales = { resident: 1, host: 1, streamed: 1, disk: 1, workspace: 1, kv: 1, stack: 1, loading: 1 };

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
  /** Streamed layers per step and bytes read from disk per decode step (a mixture of experts': its expected picks). */
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
  /** float32 bytes of the streamed tensors each load allocates above FRESH_ALLOCATION_BYTES (first-touched every load). */
  freshBytes: number;
  /** float32 bytes of the smaller streamed tensors (from glibc's heap: fresh or not, `TimeScales.freshLoad` says). */
  heapBytes: number;
}

/**
 * glibc serves allocations above its largest dynamic mmap threshold (32 MiB on 64-bit) with fresh pages every time,
 * while smaller ones come back from its heap warm: on this kind of VM the first touch of fresh memory dominates.
 */
export const FRESH_ALLOCATION_BYTES = 32 * 1024 ** 2;

/**
 * The midpoint-rule placement of the tensors of `objects` under `policy`; with `expertShare` < 1, what one load reads
 * of a sparse layer's experts (tensors with a `unit`) is that share of them (experts read on demand).
 */
function placement(objects: { tensors: TensorSpec[] }[], policy: Policy, compress = policy.compressWeight, expertShare = 1, held?: Readonly<Record<string, number>>): LayerPlacement {
  const config = compress ? policy.compWeightConfig : undefined;
  const p: LayerPlacement = { resident: true, hostElements: 0, diskElements: 0, diskBytes: 0, computeBytes: 0, hostBytes: 0, freshBytes: 0, heapBytes: 0 };
  for (const obj of objects) {
    const tiers = placeWeights(obj.tensors, policy.wGpuPercent, policy.wCpuPercent);
    obj.tensors.forEach((t, i) => {
      // A matrix the backend holds as blocks (a GGUF file's): its bytes on any tier, read where it lies — no conversion
      // and no fresh array per load, only the disk read when it is on disk.
      const blocks = held?.[t.name];
      // The token table and head held as blocks stay in the backend, resident, whatever the percents.
      if (tiers[i] === 'compute' || (blocks !== undefined && (t.name === 'embed_tokens.weight' || t.name === 'lm_head.weight'))) {
        p.computeBytes += blocks ?? 4 * numel(t.shape);
        return;
      }
      // A sparse layer's expert read on demand: the share of its experts a load reads.
      const share = t.unit === undefined ? 1 : expertShare;
      if (blocks !== undefined) {
        p.resident = false;
        if (tiers[i] === 'host') p.hostBytes += share * blocks;
        else p.diskBytes += share * Math.ceil(blocks / 4096) * 4096;
        return;
      }
      const n = share * numel(t.shape);
      p.resident = false;
      // Each tensor is converted into a float32 array of its own per load.
      if (4 * n > FRESH_ALLOCATION_BYTES) p.freshBytes += 4 * n;
      else p.heapBytes += 4 * n;
      if (tiers[i] === 'host') {
        p.hostElements += n;
        p.hostBytes += share * storageBytes(t.shape, config);
      } else {
        p.diskElements += n;
        // One file per streamed unit, each tensor at a 4 KiB boundary (OffloadingBackend's layout).
        p.diskBytes += share * Math.ceil(storageBytes(t.shape, config) / 4096) * 4096;
      }
    });
  }
  // 4-bit weights on the compute tier are stored dequantized (fp32), so they cost the same.
  return p;
}

/**
 * The midpoint-rule placement of one decoder layer under `policy` (every layer is placed alike), as a load of a step
 * of `tokens` tokens reads it: a mixture of experts' decode steps read only the experts they are expected to choose.
 */
export function layerPlacement(shape: ModelShape, policy: Policy, tokens = Number.POSITIVE_INFINITY): LayerPlacement {
  const moe = shape.family?.moe;
  const share = moe && Number.isFinite(tokens) ? expertReadShare(moe, expectedDistinctExperts(moe, tokens)) : 1;
  // Layer 0 stands for every layer (a GGUF mix's few wider matrices elsewhere aside).
  return placement(layerObjects({ ...shape, numLayers: 1 }).filter((o) => o.name.startsWith('attention_') || o.name.startsWith('mlp_')), policy, policy.compressWeight, share, shape.family?.held);
}

/**
 * The output head's placement (final LayerNorm and its own copy of the token table): streamed like a layer when any of
 * it is off the compute tier, except opt-350m's (project_out), which OffloadingBackend keeps resident.
 */
export function headPlacement(shape: ModelShape, policy: Policy): LayerPlacement {
  const head = layerObjects({ ...shape, numLayers: 0 }).filter((o) => o.name === 'output_embed');
  if ((shape.wordEmbedProjDim ?? shape.hiddenSize) !== shape.hiddenSize) return placement(head, { ...policy, wGpuPercent: 100, wCpuPercent: 0 });
  return placement(head, policy, policy.compressWeight, 1, shape.family?.held);
}

/** The input embedding's placement (gathered row by row from its home, never compressed). */
export function embeddingPlacement(shape: ModelShape, policy: Policy): LayerPlacement {
  return placement(layerObjects({ ...shape, numLayers: 0 }).filter((o) => o.name === 'input_embed'), policy, false, 1, shape.family?.held);
}

/**
 * The profile key of a shape (`modelShapeOfDescription`'s, so a pure function of the description): its widths, and for a
 * non-OPT family its layer structure (KV heads and head width, gated MLP, RMSNorm, q/k/v biases, and the kinds beyond a
 * Llama layer's): `flexhelm profile` times that family's own layer.
 */
export function shapeKeyOf(shape: ModelShape): ShapeKey {
  const key: ShapeKey = { hiddenSize: shape.hiddenSize, ffnDim: shape.ffnDim, numHeads: shape.numHeads, vocabSize: shape.vocabSize, wordEmbedProjDim: shape.wordEmbedProjDim ?? shape.hiddenSize };
  const f = shape.family;
  if (!f) return key;
  const attentionBias = f.layerTensors.some((t) => t.name === 'self_attn.q_proj.bias');
  const family = { kvHeads: f.kvHeads, headDim: f.headDim, gatedMlp: f.gatedMlp, norm: f.finalNorm === 2 ? 'layernorm' : 'rmsnorm', attentionBias } as const;
  return { ...key, family: f.extraKinds.length > 0 ? { ...family, kinds: [...f.extraKinds] } : family };
}

/** The layer profile for this shape and backend, or an error saying what to profile. */
export function backendProfile(profile: MachineProfile, shape: ModelShape, backend: string): BackendProfile {
  const id = shapeId(shapeKeyOf(shape));
  const s: ShapeProfile | undefined = profile.shapes[id];
  const b = s?.backends[backend];
  if (!b) throw new Error(`the machine profile has no ${backend} figures for this model's shapes (${id}); run \`flexhelm profile --model …\` for it`);
  return b;
}

/** The fitted memory scales for this shape and backend, if the profile has them. */
export function fittedMemoryScales(profile: MachineProfile | undefined, shape: ModelShape, backend: string = 'onnxruntime-fp32'): MemoryScales | undefined {
  if (!profile) return undefined;
  try {
    return backendProfile(profile, shape, backend).fit?.memory;
  } catch {
    return undefined;
  }
}

const median = (xs: { median: number }[]) => xs.map((x) => x.median);

/**
 * Probed step costs never fall as rows grow; a probe that does (a noisy sample at few rows) is read through the
 * cheaper cost of the larger batch.
 */
export function nonDecreasing(ys: readonly number[]): number[] {
  const out = [...ys];
  for (let i = out.length - 2; i >= 0; i--) out[i] = Math.min(out[i]!, out[i + 1]!);
  return out;
}

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
  /**
   * The head for `rows` rows; with a decode probe, as a run pays it: `run.logits` plus argmax and log-sum-exp per row
   * (`streamed`: the head's weights handed over each step, its load excluded).
   */
  head(rows: number, streamed = false): number {
    const d = this.b.decode;
    if (d && streamed && d.streamedLogitsMs) return interpolate(d.streamedRows ?? d.rows, nonDecreasing(median(d.streamedLogitsMs)), rows) + d.sampleMsPerRow * rows;
    if (d) return interpolate(d.rows, nonDecreasing(median(d.logitsMs)), rows) + d.sampleMsPerRow * rows;
    return interpolate(this.b.headRows, median(this.b.headMs), rows);
  }
  /**
   * One decode layer of `rows` rows at context `past + 1`, from the decode probe: resident (backend-held cache, no
   * round trip of its own) or streamed (weights hand-over and the layer call, one micro-batch). Undefined without a probe.
   */
  decodeLayer(rows: number, past: number, streamed: boolean): number | undefined {
    const d = this.b.decode;
    const ys = streamed ? d?.streamedLayerMs : d?.directLayerMs;
    if (!d || !ys) return undefined;
    const slope = (streamed ? d.streamedMsPerRowToken : d.directMsPerRowToken) ?? 0;
    return Math.max(0, interpolate(streamed ? (d.streamedRows ?? d.rows) : d.rows, nonDecreasing(median(ys)), rows) + slope * rows * (past + 1 - d.context));
  }
  embed(rows: number): number {
    return this.b.roundTripMs.median + this.b.embedMsPerRow * rows;
  }
}

/** Milliseconds to load one streamed layer: host conversions next to the disk read and its conversion. */
export function loadMs(p: LayerPlacement, host: HostProfile, compress: boolean, heapFreshShare = 0): number {
  if (p.resident) return 0;
  const convGps = compress ? host.dequant4Gps.median : host.f16ToF32Gps.median;
  const conv = (n: number) => n / (convGps * 1e9) * 1000;
  const disk = p.diskBytes > 0 ? p.diskBytes / ((host.diskReadGBs?.median ?? 0.5) * 1e9) * 1000 + conv(p.diskElements) : 0;
  // Conversions use the CPU's cores together; the disk read waits on the device. Both run at once. Large tensors land in
  // fresh memory, whose first touch costs more than the conversion itself on this kind of VM.
  const fresh = (p.freshBytes + heapFreshShare * p.heapBytes) * ((host.freshMsPerMB?.median ?? 0) / 1e6);
  return Math.max(conv(p.hostElements + p.diskElements), disk) + fresh;
}

/**
 * One step of a block of `gbs · ngb` rows feeding `seq` tokens each after `past` cached ones, as OffloadingBackend
 * schedules it: per streamed layer the next layer loads while this one computes its micro-batches.
 */
export function stepCost(shape: ModelShape, policy: Policy, profile: MachineProfile, seq: number, past: number, options: CostOptions = {}): StepCost & { path: 'direct' | 'offloaded'; backend: string } {
  const g = policy.gpuBatchSize;
  const B = g * policy.numGpuBatches;
  const h = shape.hiddenSize;
  // K (or V) values per token: fewer than hidden with grouped-query attention.
  const kvRow = kvWidth(shape) / 2;
  const L = shape.numLayers;
  const direct = policy.wGpuPercent === 100 && !policy.compressWeight;
  const backend = options.backend ?? 'onnxruntime-fp32';
  const costs = new LayerCosts(backendProfile(profile, shape, backend));
  const k = options.timeScales ?? costs.b.fit?.time ?? UNIT_TIME_SCALES;
  const rt = costs.b.roundTripMs.median;
  const embedMs = costs.embed(B * seq);
  // Decode steps over a GGUF file's blocks read their bytes, not the probe's 16-bit weights.
  const share = seq === 1 ? heldDecodeShare(shape) : { layer: 1, head: 1 };
  if (direct) {
    // The backend-held KV cache's forward: every layer in one worker request, one batch of B rows.
    const scale = seq === 1 ? k.directDecode : k.directPrefill;
    const layer = share.layer * scale * ((seq === 1 ? costs.decodeLayer(B, past, false) : undefined) ?? costs.call(B, seq, past, false, true) - rt);
    const headMs = share.head * scale * costs.head(B);
    return { path: 'direct', backend: costs.b.backend, ms: rt + embedMs + L * layer + headMs, residentLayerMs: layer, streamedLayerMs: 0, loadMs: 0, computeMs: 0, embedMs, headMs };
  }
  const kCompute = seq === 1 ? k.decodeCompute : k.prefillCompute;
  // A sparse layer's visit reads the experts the whole block's tokens choose (every micro-batch shares the reads).
  const placement = layerPlacement(shape, policy, B * seq);
  const copyMsPerByte = 1 / (profile.host.copyGBs.median * 1e6);
  const T = past + seq;
  const setWeights = (seq === 1 ? costs.b.decode?.handOverMs?.median : undefined) ?? costs.b.setWeightsMs?.median ?? 0;
  const probed = seq === 1 && costs.b.decode?.streamedLayerMs !== undefined;
  // The probe streams whole layers; a split placement hands over only its streamed share of the weights.
  const streamedShare = placement.resident ? 0 : (placement.hostElements + placement.diskElements) / (placement.hostElements + placement.diskElements + placement.computeBytes / 4);
  // Decode from the probe: a streamed layer of one micro-batch (its share of the hand-over); resident layers without it.
  const probedCall = (rows: number, streamed: boolean) => costs.decodeLayer(rows, past, true)! - (streamed ? (1 - streamedShare) * setWeights : setWeights);
  const micro = (streamed: boolean): number => {
    if (probed) {
      if (B <= g) return probedCall(B, streamed);
      let ms = streamed ? streamedShare * setWeights : 0;
      const perByte = costs.b.decode!.microBatchMsPerByte ?? copyMsPerByte;
      for (let b0 = 0; b0 < B; b0 += g) {
        const rows = Math.min(g, B - b0);
        ms += rt + probedCall(rows, false) + microBatchBytes(rows, past, h, kvRow) * perByte;
      }
      return ms;
    }
    if (B <= g) return costs.call(B, seq, past, streamed);
    let ms = 0;
    for (let b0 = 0; b0 < B; b0 += g) {
      const rows = Math.min(g, B - b0);
      // setStep per micro-batch (its mask slice), copies of its hidden and past rows, and its results set back.
      const bytes = 4 * (rows * seq * T + 2 * rows * seq * h + 2 * rows * past * kvRow + 2 * rows * T * kvRow);
      ms += rt + bytes * copyMsPerByte + costs.call(rows, seq, past, streamed);
    }
    return ms;
  };
  const residentLayerMs = share.layer * kCompute * micro(false);
  const load = k.load * loadMs(placement, profile.host, policy.compressWeight, k.freshLoad);
  const compute = placement.resident ? 0 : share.layer * kCompute * ((probed ? 0 : setWeights) + micro(true));
  // The next layer loads while this one computes, but both share the machine's cores: `contention` of the shorter one
  // is not hidden (fitted).
  const streamedLayerMs = placement.resident ? 0 : Math.max(load, compute) + k.contention * Math.min(load, compute);
  const layerMs = placement.resident ? residentLayerMs : streamedLayerMs;
  // A streamed head loads during the last layer; what that layer does not cover is waited for before the head.
  const head = headPlacement(shape, policy);
  const headLoad = head.resident ? 0 : k.headLoad * loadMs(head, profile.host, policy.compressWeight, k.freshLoad);
  const headMs = share.head * kCompute * costs.head(B, !head.resident) + Math.max(0, headLoad - layerMs);
  const setStep = B <= g ? rt + 4 * B * seq * T * copyMsPerByte : 0;
  return { path: 'offloaded', backend: `offload(${costs.b.backend})`, ms: setStep + embedMs + L * layerMs + headMs, residentLayerMs, streamedLayerMs, loadMs: load, computeMs: compute, embedMs, headMs };
}

/** The memory plan's view of a compute path: oneDNN multiplies streamed f16 weights where they lie, onnxruntime takes float32 copies. */
export function planOptionsFor(backend: string | undefined): PlanOptions {
  return { handOver: backend?.startsWith('onednn') ? 'f16' : 'fp32' };
}

/** The parts of a predicted peak RSS (bytes), each scaled by its factor in `MemoryScales`. */
export interface PeakRssTerms {
  base: number;
  resident: number;
  host: number;
  streamed: number;
  disk: number;
  workspace: number;
  kv: number;
  stack: number;
  /** While loading (before any cache exists): the weights' homes so far, the fp32 tables, about twelve compute-tier layers' garbage and three off-compute ones'. */
  loading: number;
}

/** Host- and disk-tier layers whose fp32 forms are alive at once while a model loads (see `peakRssTerms`). */
export const OFF_COMPUTE_LOADING_LAYERS = 3;

/**
 * The terms of a process's peak RSS under `policy`: the profiled floor (Node, onnxruntime, worker); compute-tier
 * weights in fp32 (layers, the input embedding and the head where they are resident) and what loading them leaves for
 * the garbage collector (each passes through fp32 arrays and an encoded graph: about twelve layers' worth); host-tier
 * copies; streamed layers and a streamed head in flight are the plan's workspace (host and disk tier alike); the KV cache, activations and workspace from `planMemory`; and, when every layer runs in one onnxruntime
 * session (all resident), that session's arena for the prefill's activations of every layer (measured: about 0.8–1 MB
 * per row·token on opt-125m, growing with the block and the prompt, which one-layer workspace terms miss).
 */
export function peakRssTerms(shape: ModelShape, policy: Policy, plan: MemoryPlan, baseRssBytes: number, workload?: Workload): PeakRssTerms {
  const p = layerPlacement(shape, policy);
  const L = shape.numLayers;
  const e = shape.wordEmbedProjDim ?? shape.hiddenSize;
  // The input embedding lives on its tiers (fp32, f16 in pinned RAM, or a file); opt-350m's (project_in) stays fp32 in the backend.
  const ep = embeddingPlacement(shape, policy);
  const fullEmbedding = e !== shape.hiddenSize || p.resident;
  // OPT's learned position table; rotary families have none.
  const positionRows = shape.family ? 0 : shape.maxPositions + 2;
  const embedding = fullEmbedding ? 4 * (shape.vocabSize * e + positionRows * shape.hiddenSize + (e !== shape.hiddenSize ? 2 * e * shape.hiddenSize : 0)) : ep.computeBytes;
  const hp = headPlacement(shape, policy);
  const direct = policy.wGpuPercent === 100 && !policy.compressWeight;
  const layerFp32 = p.computeBytes + 4 * (p.hostElements + p.diskElements);
  const residentGarbage = p.resident ? Math.min(L, 12) * layerFp32 : 0;
  // Loading: compute-tier layers leave about twelve layers' fp32 forms and graphs to the collector; host- and disk-tier
  // parts are released as each layer is written to its tier, so about three layers' fp32 are alive at once (measured:
  // Llama-3.1-8B all on disk peaked at 6.06 GiB, where twelve layers alone predicted 9.7 GiB).
  const loadingGarbage = Math.min(L, 12) * p.computeBytes + Math.min(L, OFF_COMPUTE_LOADING_LAYERS) * 4 * (p.hostElements + p.diskElements);
  // A GGUF file's blocks held by the backend (every weight resident): the plan's weights are their bytes, nothing passes
  // through float32 copies but the few tensors held otherwise, and the loading is the plan's (blocks read and repacked).
  if (direct && shape.family?.held) {
    const terms = { base: baseRssBytes, resident: plan.weights.compute + plan.head, host: 0, streamed: 0, disk: 0 };
    return { ...terms, workspace: plan.activations.compute + plan.activations.host + plan.workspace, kv: plan.cache.compute + plan.cache.host, stack: 0, loading: plan.loading - plan.runtime };
  }
  return {
    base: baseRssBytes,
    resident: L * p.computeBytes + embedding + hp.computeBytes + residentGarbage,
    host: L * p.hostBytes + (fullEmbedding ? 0 : ep.hostBytes) + hp.hostBytes,
    // Host-tier layers and the head in flight are the plan's workspace too (two streamed units in fp32, the worker's
    // previous layer, one recycled layer, each streamed layer's onnxruntime overhead). Measured with `flexhelm run`
    // (offload bench/RESULTS.md, 2026-12-02): four more layers and the head here over-predicted qwen2-0.5b by 1.22×
    // and Llama-3.2-1B by 1.37× on the host tier (its 1 GB head counted twice).
    streamed: 0,
    // Disk-tier tensors in flight are the plan's workspace (two streamed units in fp32, two file images, the worker's
    // previous layer): their loads wait on the device, so none beyond it are alive at the peak. Measured: Llama-3.1-8B
    // with every weight on disk peaked at 6.06 GiB against a workspace of 5.77 GiB; four more layers and the head here
    // (6.8 GiB) had it refused under --max-ram 8.
    disk: 0,
    workspace: plan.activations.compute + plan.activations.host + plan.workspace,
    kv: plan.cache.compute + plan.cache.host,
    stack: direct && workload ? stackActivationBytes(shape, policy.gpuBatchSize * policy.numGpuBatches, workload.promptLen) : 0,
    // Dummy or checkpoint layers arrive as fp32 (and a transposed copy) before they are placed; the embedding and head
    // tables as fp32 too. Short workloads peak here, not in the run.
    loading: L * (p.computeBytes + p.hostBytes) + 4 * (shape.vocabSize * e + positionRows * shape.hiddenSize) + hp.computeBytes + 4 * (hp.hostElements + hp.diskElements) + loadingGarbage,
  };
}

/**
 * fp32 bytes an all-resident prefill leaves in the onnxruntime worker over every layer: per chunk of rows (the worker
 * runs at most ORT_CHUNK_TOKENS tokens per call) its activations — the MLP's, a few hidden-wide, the attention scores —
 * and, for every row·token, the q, k, v and output copies fetched into the worker's JS heap until its next collection.
 */
export function stackActivationBytes(shape: ModelShape, block: number, promptLen: number): number {
  const rowsPerChunk = Math.max(1, Math.floor(ORT_CHUNK_TOKENS / promptLen));
  const chunkTokens = Math.min(block, rowsPerChunk) * promptLen;
  const h = shape.hiddenSize;
  // A gated MLP holds gate and up; q and the attention output are heads × head_dim wide, k and v as wide as the KV heads.
  const ffn = shape.ffnDim * (shape.family?.gatedMlp ? 2 : 1);
  const qkvo = 2 * attentionWidth(shape) + kvWidth(shape);
  return 4 * shape.numLayers * (chunkTokens * (ffn + 8 * h + shape.numHeads * promptLen) + block * promptLen * qkvo);
}

/** Predicted peak RSS of a process running `policy`: the floor plus the larger of the run's and the loading's terms (`peakRssTerms`), each scaled (fitted per shape). */
export function predictPeakRss(shape: ModelShape, policy: Policy, plan: MemoryPlan, baseRssBytes: number, scales: MemoryScales = UNIT_MEMORY_SCALES, workload?: Workload): number {
  const t = peakRssTerms(shape, policy, plan, baseRssBytes, workload);
  const run = scales.resident * t.resident + scales.host * t.host + scales.streamed * t.streamed + scales.disk * t.disk + scales.workspace * t.workspace + scales.kv * t.kv + scales.stack * t.stack;
  return t.base + Math.max(run, scales.loading * t.loading);
}

/** Predicted time, throughput, memory and disk use of running one block of `policy` on `workload`. */
export function predictCost(shape: ModelShape, policy: Policy, workload: Workload, profile: MachineProfile, options: CostOptions = {}): CostPrediction {
  const s = workload.promptLen;
  const n = Math.max(1, workload.genLen);
  const prefill = stepCost(shape, policy, profile, s, 0, options);
  const decode = stepCost(shape, policy, profile, 1, s + (n - 2) / 2, options);
  const totalMs = prefill.ms + (n - 1) * decode.ms;
  const block = policy.gpuBatchSize * policy.numGpuBatches;
  const memory = planMemory(shape, policy, workload, planOptionsFor(options.backend));
  const placement = layerPlacement(shape, policy, block);
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
    peakRssBytes: predictPeakRss(shape, policy, memory, profile.host.baseRssBytes, options.memoryScales ?? backendProfile(profile, shape, options.backend ?? 'onnxruntime-fp32').fit?.memory, workload),
    diskBytes: memory.diskBytes,
    streamedLayers,
    diskBytesPerStep: streamedLayers * placement.diskBytes,
  };
}
