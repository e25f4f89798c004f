import { attentionWidth, kvWidth, layerElements, layerObjects, numel, type ModelShape } from './model-shape.js';
import { grownKvCapacity } from './kv-capacity.js';
import { placeWeights, splitCacheSequences, type Tier } from './placement.js';
import type { CompressionConfig, Policy } from './policy.js';

/** The run's shape: how many sequences and how long. */
export interface Workload {
  promptLen: number;
  genLen: number;
}

/** Bytes one tensor takes in storage form on host or disk: fp16, or FlexLLMGen's 4-bit groups (≥ 2 dims only). */
export function storageBytes(shape: readonly number[], compress: CompressionConfig | undefined): number {
  if (!compress || shape.length < 2) return numel(shape) * 2;
  const dim = compress.groupDim;
  const size = shape[dim];
  if (size === undefined) throw new RangeError(`compression groupDim ${dim} is outside a tensor of ${shape.length} dimensions (shape [${shape.join(', ')}])`);
  const groups = Math.ceil(size / compress.groupSize);
  const rest = numel(shape) / size;
  // Codes: two per byte over the padded group axis; scale and min: two fp16 per group.
  return (groups * compress.groupSize * rest) / 2 + groups * rest * 2 * 2;
}

/** What the plan knows of the compute backend under the tiers. */
export interface PlanOptions {
  /**
   * How it takes streamed weight matrices: `fp32` (default: onnxruntime and the reference backend convert each streamed
   * layer to float32 copies) or `f16` (oneDNN: `StreamedLayers.acceptsF16`, multiplied where they lie).
   */
  handOver?: 'f16' | 'fp32';
}

export interface MemoryPlan {
  /**
   * Resident bytes per tier and kind; the compute tier and the host tier are both RAM on a machine without a GPU.
   * Weights include the input embedding `[tok, pos]` (f16 off the compute tier, never compressed: rows are gathered)
   * and the output head's tensors off the compute tier (f16 or 4-bit, like a layer's).
   */
  weights: Record<Tier, number>;
  cache: Record<Tier, number>;
  activations: Record<Tier, number>;
  /**
   * Scratch the schedule needs: two streamed units in float32 and two staging slots for their disk files
   * (double-buffered), a slot per expert of a sparse layer's largest expert on disk (`expertStagingSlots`), per-micro-batch attention/MLP/logits and K/V buffers, and what onnxruntime holds for streamed
   * layers (the previous layer's tensors until the worker's next garbage collection, the fused q/k/v matrix).
   */
  workspace: number;
  /** The part of `workspace` a sparse layer's experts are read into on demand (0 without experts on disk). */
  expertStaging: number;
  /**
   * The output head's tensors on the compute tier, in float32 in the compute backend (FlexLLMGen's OutputEmbed
   * `[ln_w, ln_b, tok]` is placed by the weight percents like a layer object; its host and disk parts are counted in
   * `weights` and it streams like a layer). opt-350m's head (project_out) always stays here.
   */
  head: number;
  /** The process's own baseline: Node, onnxruntime and its worker thread, the addon (`RUNTIME_BYTES`). */
  runtime: number;
  /**
   * Peak while loading, before any cache exists: runtime plus the larger of the head's table three times (the float32
   * array read from the checkpoint, the encoded graph handed to onnxruntime, onnxruntime's own copy) with the embedding
   * read in float32, and the resident weights with one decoder layer in flight (float32 twice, its f16 image).
   */
  loading: number;
  /** Peak RAM: the larger of `loading` and the run (runtime + compute and host tiers + workspace + head). */
  ramBytes: number;
  diskBytes: number;
}

const FP32 = 4;

/**
 * Pinned slots a sparse layer's experts read into on demand (one expert's disk bytes each): one per expert, so a
 * step's picks load in parallel and an f16 hand-over keeps each in its slot until the layer is replaced.
 */
export function expertStagingSlots(model: { moe?: { experts: number } }): number {
  return model.moe?.experts ?? 0;
}
/**
 * Baseline RSS of a process running the offloaded engine on a tiny model (Node 20, onnxruntime 1.30, its worker and
 * the addon): measured 115 MiB, rounded up.
 */
export const RUNTIME_BYTES = 128 * 1024 ** 2;

/**
 * What a process streaming layers from the host tier holds beyond the two streamed units, measured with
 * `flexhelm run` on qwen2-0.5b, Llama-3.2-1B and opt-1.3b shapes (policy-search bench/host-rss.mjs, offload
 * bench/RESULTS.md 2026-12-02): about 10.5 MiB per streamed layer (its onnxruntime session's graph and arena; 12 MiB
 * counted) and one layer's fp32 arrays waiting in the recycler. Disk-tier streaming is not counted here: its loads
 * wait on the device, and the Llama-3.1-8B run on disk stayed within the plan without them.
 */
export const STREAMED_LAYER_RUNTIME_BYTES = 12 * 1024 ** 2;

export function hostStreamingBytes(streamedLayers: number, largestStreamed: number): number {
  return streamedLayers > 0 ? streamedLayers * STREAMED_LAYER_RUNTIME_BYTES + largestStreamed : 0;
}

/**
 * Prompt positions per row one prefill step computes: the engine's `prefillChunkTokens` (generate.ts), which keeps a
 * row's attention scores within 2²² values, so they grow with the prompt, not its square. (Here, not imported: this
 * module loads no engine.)
 */
function prefillPositions(heads: number, total: number): number {
  return Math.max(1, Math.min(total, Math.floor(2 ** 22 / (heads * total))));
}

/**
 * Predicted peak memory and disk use of running `shape` under `policy` for `workload` (block = gbs × ngb sequences).
 * Weights on the compute tier are held as fp32 (the form the backend consumes); host and disk hold fp16 or 4-bit.
 */
export function planMemory(shape: ModelShape, policy: Policy, workload: Workload, options: PlanOptions = {}): MemoryPlan {
  const weights: Record<Tier, number> = { compute: 0, host: 0, disk: 0 };
  const streamed = new Map<string, number>();
  const diskFile = new Map<string, number>();
  // A sparse layer's experts on disk, each read alone into a staging slot of its own size.
  const expertDisk = new Map<string, number>();
  let largestExpertDisk = 0;
  const compress = policy.compressWeight ? policy.compWeightConfig : undefined;
  // opt-350m's head (project_out) stays resident in the compute backend whatever the percents.
  const residentHead = (shape.wordEmbedProjDim ?? shape.hiddenSize) !== shape.hiddenSize;
  let head = 0;
  // Tensors the backend holds as blocks (ModelShape.family.held) keep that form on every tier and under compression:
  // the token table and the head stay in the backend (resident), a layer's matrices go to their tiers as they are.
  const held = shape.family?.held;
  const residentBytes = (t: { name: string; shape: number[] }) => held?.[t.name] ?? numel(t.shape) * FP32;
  const endHeld = (t: { name: string }) => held !== undefined && (t.name === 'embed_tokens.weight' || t.name === 'lm_head.weight') && held[t.name] !== undefined;
  for (const obj of layerObjects(shape)) {
    if (obj.name === 'output_embed' && residentHead) {
      head = obj.tensors.reduce((a, t) => a + numel(t.shape) * FP32, 0);
      continue;
    }
    const tiers = placeWeights(obj.tensors, policy.wGpuPercent, policy.wCpuPercent);
    // The input embedding is gathered row by row from its home (TieredEmbedding): stored f16, never streamed whole.
    const gathered = obj.name === 'input_embed';
    // OffloadingBackend streams a decoder layer's attention and MLP objects together (one load, one disk file), and
    // the output head as a unit of its own.
    const layer = obj.name === 'output_embed' ? 'head' : /^(attention|mlp)_(\d+)$/.exec(obj.name)?.[2];
    obj.tensors.forEach((t, i) => {
      const tier = endHeld(t) ? 'compute' : tiers[i]!; // placeWeights gives one tier per tensor
      if (tier === 'compute' && layer === 'head') head += residentBytes(t);
      else if (tier === 'compute') weights.compute += residentBytes(t);
      else {
        const blocks = held?.[t.name];
        const stored = blocks ?? storageBytes(t.shape, gathered ? undefined : compress);
        weights[tier] += stored;
        if (layer !== undefined) {
          // Blocks are read where they lie (no float32 or packed copy per load).
          streamed.set(layer, (streamed.get(layer) ?? 0) + (blocks === undefined ? numel(t.shape) * FP32 : 0));
          if (tier === 'disk') diskFile.set(layer, (diskFile.get(layer) ?? 0) + stored);
          if (tier === 'disk' && t.unit !== undefined) {
            const key = `${layer}/${t.unit}`;
            expertDisk.set(key, (expertDisk.get(key) ?? 0) + stored);
            largestExpertDisk = Math.max(largestExpertDisk, expertDisk.get(key)!);
          }
        }
      }
    });
  }
  const streamedHead = streamed.get('head') ?? 0;
  streamed.delete('head');
  const largestStreamed = Math.max(0, ...streamed.values());
  // The staging slots are sized for the largest file, the head's included.
  const largestDiskFile = Math.max(0, ...diskFile.values());
  const headTable = shape.vocabSize * (shape.wordEmbedProjDim ?? shape.hiddenSize) * FP32;

  const h = shape.hiddenSize;
  const block = policy.gpuBatchSize * policy.numGpuBatches;
  const cacheLen = workload.promptLen + workload.genLen - 1;
  // K and V elements of one sequence over all layers: grouped-query attention keeps only its KV heads.
  const kv = kvWidth(shape);
  const perSeq = cacheLen * kv * shape.numLayers;
  const seqs = splitCacheSequences(policy);
  // 4-bit: half a byte per value plus (scale, min) in f16 per group of head_dim values.
  const cacheStore = policy.compressCache ? perSeq / 2 + (perSeq / policy.compCacheConfig.groupSize) * 4 : perSeq * 2;
  // Uncompressed on the compute tier: float32 (a bf16 backend's in-place cache holds half), with the headroom an
  // in-place cache grows by (`grownKvCapacity`): counted whatever the backend, as a backend is chosen at run time.
  const computeSeq = grownKvCapacity(workload.promptLen, cacheLen) * kv * shape.numLayers * FP32;
  const cache: Record<Tier, number> = {
    // With compression every tier holds 4-bit (FlexLLMGen compresses the compute device's cache too).
    compute: seqs.compute * policy.numGpuBatches * (policy.compressCache ? cacheStore : computeSeq),
    host: seqs.host * policy.numGpuBatches * cacheStore,
    disk: seqs.disk * policy.numGpuBatches * cacheStore,
  };

  const actTier: Tier = policy.actGpuPercent === 100 ? 'compute' : policy.actCpuPercent === 100 ? 'host' : 'disk';
  const activations: Record<Tier, number> = { compute: 0, host: 0, disk: 0 };
  activations[actTier] = block * workload.promptLen * h * FP32;

  const g = policy.gpuBatchSize;
  const s = workload.promptLen;
  const total = workload.promptLen + workload.genLen;
  const perMicroBatch =
    g * s * (3 * h + attentionWidth(shape)) * FP32 + // layer input, normed input, residual; attention output (heads × head_dim)
    g * shape.numHeads * prefillPositions(shape.numHeads, s) * s * FP32 + // prefill attention scores (chunked)
    g * s * shape.ffnDim * FP32 * (shape.family?.gatedMlp ? 2 : 1) + // MLP intermediate (gate and up when gated)
    g * shape.vocabSize * FP32 + // last-position logits
    2 * g * total * kv * FP32; // K/V read workspace, one per in-flight micro-batch (no shared buffer: spec §4.3)
  // Two streamed units in float32 (the one computing, the one loading ahead: a layer and the next, the last layer and
  // the head, the head and the next step's first layer), two pinned staging slots for their disk files, and two
  // micro-batches' buffers.
  // Streamed layers also leave, measured on opt-1.3b and opt-6.7b: the previous layer's tensors, which the onnxruntime
  // worker frees only at its next garbage collection (about one layer's worth at any time), and the streamed graph's
  // Concat of q, k and v into one [E, 3E] fp32 matrix, kept in onnxruntime's arena.
  const qkvWidth = attentionWidth(shape) + kv;
  // Streamed from the host tier only (no disk share): every streamed layer's own onnxruntime overhead, and one more
  // layer's fp32 arrays, the one the backend let go of, kept for the next conversion (see `hostStreamingBytes`).
  const hostOnly = weights.disk === 0 ? hostStreamingBytes(streamed.size, largestStreamed) : 0;
  const streamedRuntime = largestStreamed > 0 ? largestStreamed + h * qkvWidth * FP32 + hostOnly : 0;
  // A backend that takes f16 (`handOver: 'f16'`, oneDNN) multiplies the streamed matrices where they are (host copies,
  // staging slots): no float32 copies, no onnxruntime worker; the live streamed layer is packed once (bf16, half its
  // float32 bytes) on a prompt step.
  const f16 = options.handOver === 'f16';
  const expertStaging = (shape.family?.moe?.experts ?? 0) * largestExpertDisk;
  const workspace = f16
    ? largestStreamed / 2 + streamedHead + 2 * largestDiskFile + expertStaging + 2 * perMicroBatch
    : largestStreamed + Math.max(largestStreamed, streamedHead) + 2 * largestDiskFile + expertStaging + 2 * perMicroBatch + streamedRuntime;

  const runtime = RUNTIME_BYTES;
  const run = runtime + weights.compute + weights.host + cache.compute + cache.host + activations.compute + activations.host + workspace + head;
  // OPT's learned position table sits beside the token table; rotary families have none.
  const embedHome = held?.['embed_tokens.weight'] ?? ((shape.family ? 0 : shape.maxPositions + 2) + shape.vocabSize) * shape.hiddenSize * FP32;
  // Each decoder layer loads as float32 read from the checkpoint, its transposed copy and its f16 disk image; one held
  // as blocks as its blocks read and their repacked copy (the largest layer's).
  const layerFp32 = held ? Math.max(...Array.from({ length: shape.numLayers }, (_, i) => heldLayerLoad(shape, i, held))) : layerElements(shape) * FP32;
  // The head loads as its float32 table (the input embedding's when tied), then either the encoded graph and
  // onnxruntime's copy (resident) or its f16 copy and file image (streamed); held as blocks, as two copies of those.
  const heldHead = held?.['lm_head.weight'];
  const headLoading = heldHead !== undefined ? 2 * heldHead : streamedHead > 0 ? headTable : 3 * headTable;
  const loading = runtime + Math.max(headLoading + embedHome, head + weights.compute + weights.host + 2 * layerFp32 + layerFp32 / 2);
  const ramBytes = Math.max(run, loading);
  const diskBytes = weights.disk + cache.disk + activations.disk;
  return { weights, cache, activations, workspace, expertStaging, head, runtime, loading, ramBytes, diskBytes };
}

export interface Budget {
  /** Bytes of RAM the run may use (model, cache, workspace; the process's own overhead is extra). */
  maxRam: number;
  /** Free bytes in the offload directory. */
  freeDisk?: number;
}

const GiB = 1024 ** 3;
export const formatGiB = (b: number): string => `${(b / GiB).toFixed(2)} GiB`;

/** Percents to try, from least to most offloaded, to suggest a policy that fits. */
function* moreOffloaded(p: Policy): Generator<Policy> {
  for (let wg = p.wGpuPercent; wg >= 0; wg -= 10) {
    for (let wc = Math.min(100 - wg, p.wCpuPercent + (p.wGpuPercent - wg)); wc >= 0; wc -= 10) {
      yield { ...p, wGpuPercent: wg, wCpuPercent: wc };
    }
  }
  // Then the KV cache leaves the compute tier: host memory (f16), then disk.
  for (const [cg, cc] of [[0, 100], [0, 0]] as const) {
    for (let wc = 100; wc >= 0; wc -= 10) yield { ...p, wGpuPercent: 0, wCpuPercent: wc, cacheGpuPercent: cg, cacheCpuPercent: cc };
  }
}

/** A policy close to `policy` whose plan fits the budget, or undefined when even the most offloaded one does not. */
export function suggestPolicy(shape: ModelShape, policy: Policy, workload: Workload, budget: Budget, options: PlanOptions = {}): Policy | undefined {
  for (const candidate of moreOffloaded(policy)) {
    const plan = planMemory(shape, candidate, workload, options);
    if (plan.ramBytes <= budget.maxRam && (budget.freeDisk === undefined || plan.diskBytes <= budget.freeDisk)) return candidate;
  }
  for (const gbs of [policy.gpuBatchSize >> 1, 1]) {
    if (gbs < 1 || gbs === policy.gpuBatchSize) continue;
    const smaller = suggestPolicy(shape, { ...policy, gpuBatchSize: gbs }, workload, budget, options);
    if (smaller) return smaller;
  }
  return undefined;
}

export const describePercents = (p: Policy): string =>
  `--percent ${p.wGpuPercent} ${p.wCpuPercent} ${p.cacheGpuPercent} ${p.cacheCpuPercent} ${p.actGpuPercent} ${p.actCpuPercent} --gpu-batch-size ${p.gpuBatchSize} --num-gpu-batches ${p.numGpuBatches}`;

/** The policy as flexhelm run's flags: `describePercents`, then `--compress-weight` when it compresses weights. */
export const describePolicy = (p: Policy): string => `${describePercents(p)}${p.compressWeight ? ' --compress-weight' : ''}`;

/** Thrown before a run starts when its plan cannot fit: the numbers and a policy that would. */
export class BudgetError extends Error {
  constructor(message: string, readonly plan: MemoryPlan, readonly suggestion?: Policy) {
    super(message);
    this.name = 'BudgetError';
  }
}

/** Refuses a plan that does not fit, before any work starts, with the numbers and a suggested policy. */
export function checkBudget(shape: ModelShape, policy: Policy, workload: Workload, budget: Budget, options: PlanOptions = {}): MemoryPlan {
  const plan = planMemory(shape, policy, workload, options);
  const problems: string[] = [];
  if (plan.ramBytes > budget.maxRam) {
    problems.push(
      `needs ${formatGiB(plan.ramBytes)} of RAM but the budget is ${formatGiB(budget.maxRam)} ` +
        `(weights ${formatGiB(plan.weights.compute + plan.weights.host)}, output head ${formatGiB(plan.head)}, KV cache ${formatGiB(plan.cache.compute + plan.cache.host)}, ` +
        `activations ${formatGiB(plan.activations.compute + plan.activations.host)}, workspace ${formatGiB(plan.workspace)}, runtime ${formatGiB(plan.runtime)}; ` +
        `${formatGiB(plan.loading)} while loading)`,
    );
  }
  if (budget.freeDisk !== undefined && plan.diskBytes > budget.freeDisk) {
    problems.push(`needs ${formatGiB(plan.diskBytes)} in the offload directory but only ${formatGiB(budget.freeDisk)} is free`);
  }
  if (problems.length === 0) return plan;
  const suggestion = suggestPolicy(shape, policy, workload, budget, options);
  const hint = suggestion
    ? `a policy that fits: ${describePercents(suggestion)}`
    : 'no policy fits: raise --max-ram, free disk space, enable --compress-weight, or use shorter prompts/fewer sequences';
  throw new BudgetError(`the offloading plan does not fit: ${problems.join('; ')}. ${hint}`, plan, suggestion);
}

/**
 * The `layerFp32` stand-in for layer `index` when the backend holds some of its matrices as blocks: the plan counts
 * 2.5 × `layerFp32` while a layer loads (float32 read, transposed copy, half for its disk image), so a block matrix
 * enters as 2/2.5 of its bytes (its blocks read and their repacked copy: two copies), the rest as float32.
 */
function heldLayerLoad(shape: ModelShape, index: number, held: Readonly<Record<string, number>>): number {
  let bytes = 0;
  for (const t of shape.family?.layerTensors ?? []) {
    const blocks = held[`layers.${index}.${t.name}`];
    bytes += blocks !== undefined ? (2 / 2.5) * blocks : numel(t.shape) * FP32;
  }
  return bytes;
}
