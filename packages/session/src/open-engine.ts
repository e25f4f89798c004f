import { existsSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { echoHeadRows, Engine, ReferenceBackend, timePhase, UnsupportedKindsError, type MemoryBudget, type DecoderBackend, type ModelDescription } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { BudgetError, checkBudget, checkOffloadDir, describePolicy, formatGiB, formatTierSummary, modelShapeOfDescription, OffloadingBackend, planMemory, PolicyError, type MemoryPlan, type ModelShape, type Policy, type Workload } from '@flexhelm/offload';
import { GgufTensorSource, ggufQuantizedWeights, type QuantizedWeights } from '@flexhelm/gguf';
import { selectBackend } from './select-backend.js';
import { EngineSetupError, modelFingerprint } from '@flexhelm/runner';
import { computeDtypeRefusal, decideBackend, oneDnnUsability, type ComputeDtype } from './decide-backend.js';
import { planShape } from './plan-shape.js';

export interface OpenEngineOptions {
  /** The model's name as the user gave it (part of the model identity). */
  model: string;
  folder: string;
  /**
   * The GGUF file `folder` (its config and tokenizer) was made from: the weights are read from it, and on oneDNN its
   * Q8_0 / Q4_0 / K-quant matrices are multiplied as the file stores them (`ggufQuantizedWeights`), never widened —
   * resident, or kept so on the host and disk tiers when the policy streams them.
   */
  gguf?: string;
  /** The model (any family): the memory plan is checked for its shape (`modelShapeOfDescription`). */
  description: ModelDescription;
  /** The shape `prepareSession` planned (`planShape` of the same model, file and dtype); made here when absent. */
  shape?: ModelShape;
  /** Use `description` instead of reading `folder/config.json` (dummy / resolved models). */
  configOverride?: boolean;
  policy: Policy;
  offloadDir: string;
  /** RAM budget in bytes for weights, cache and workspace. */
  maxRam: number;
  /** The workload the memory plan is checked against (the longest prompt and generation of the run). */
  workload: Workload;
  computeDtype?: ComputeDtype;
  log?: (line: string) => void;
}

export interface OpenedEngine {
  engine: Engine;
  backend: DecoderBackend;
  /** Identity of the model and compute path, for request caches: results depend on both. */
  modelId: string;
  plan: MemoryPlan;
  /** The layers multiply a GGUF file's blocks as stored (the machine profile timed widened layers, not these). */
  heldBlocks: boolean;
}

function freeBytesAt(dir: string): number | undefined {
  let probe = dir;
  while (!existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe);
  try {
    const fs = statfsSync(probe);
    return fs.bavail * fs.bsize;
  } catch {
    return undefined;
  }
}

/**
 * The budget every request is checked against (`EngineOptions.memory`): the plan of a batch of `rows` rows as long as
 * the request (`planMemory` with the policy's micro-batches cut to those rows), plus the logits of an echo's head
 * chunk, within `maxRam`.
 */
export function requestMemoryBudget(shape: ModelShape, policy: Policy, maxRam: number, handOver: 'f16' | 'fp32' = 'fp32'): MemoryBudget {
  return {
    limitBytes: maxRam,
    needBytes(rows, need) {
      const gbs = Math.min(rows, policy.gpuBatchSize);
      const rowsPolicy = { ...policy, gpuBatchSize: gbs, numGpuBatches: Math.ceil(rows / gbs) };
      const plan = planMemory(shape, rowsPolicy, { promptLen: need.promptTokens, genLen: Math.max(1, need.newTokens) }, { handOver });
      return plan.ramBytes + (need.echo ? echoHeadRows(shape.vocabSize) * shape.vocabSize * 4 : 0);
    },
  };
}

/**
 * Opens the engine a run, a worker or the server computes with, after checking everything that can be checked
 * first: the offload folder, the memory plan against the budget (a plan that cannot fit is refused with the numbers and
 * a suggested policy), and the compute dtype. `computeDtype` (default `auto`) other than fp32 computes on oneDNN where
 * it is available (onnxruntime fp32 otherwise, with a notice). With streamed (offloaded) layers `auto` means bf16 on
 * oneDNN (its first-batch gate needs every layer resident).
 */
export async function openEngine(o: OpenEngineOptions): Promise<OpenedEngine> {
  const log = o.log ?? (() => {});
  const { policy } = o;
  const computeDtype = o.computeDtype ?? 'auto';
  const refusal = computeDtypeRefusal(computeDtype);
  if (refusal !== undefined) throw new EngineSetupError(refusal);
  // A GGUF file's blocks held by oneDNN count at their size (planShape); any other backend holds float32 copies.
  const shape = o.shape ?? planShape(o.description, o.gguf, computeDtype);
  const allResident = policy.wGpuPercent === 100 && !policy.compressWeight;
  const decision = decideBackend(computeDtype, { allResident, onednn: oneDnnUsability() });
  // oneDNN multiplies streamed f16 weights where they lie; the others take float32 copies (planned again on a fallback).
  const planFor = (handOver: 'f16' | 'fp32', planned: ModelShape = shape): MemoryPlan => {
    try {
      checkOffloadDir(policy, o.offloadDir);
      return checkBudget(planned, policy, o.workload, { maxRam: o.maxRam, freeDisk: freeBytesAt(o.offloadDir) }, { handOver });
    } catch (err) {
      if (err instanceof PolicyError || err instanceof BudgetError) throw new EngineSetupError(err.message);
      throw err;
    }
  };
  let plan = planFor(decision.library === 'onednn' ? 'f16' : 'fp32');
  log(`model ${o.model} (${o.folder}); policy ${describePolicy(policy)}; planned RAM ${formatGiB(plan.ramBytes)} of ${formatGiB(o.maxRam)}, disk ${formatGiB(plan.diskBytes)}`);

  let compute: DecoderBackend;
  let quantized: QuantizedWeights | undefined;
  if (decision.dtype === 'fp32') {
    compute = new OrtBackend();
    log('backend: onnxruntime fp32 (--compute-dtype auto|bf16 uses the oneDNN backend where the CPU has AMX or AVX-512)');
  } else {
    // auto's accuracy gate compares fp32 and bf16 on the first batch with every layer resident, which streamed layers
    // are not: under offloading auto takes bf16 directly (it passed the gates in onednn-backend's accuracy report).
    // Streamed layers are packed on their prompt step only; decode steps multiply the streamed fp32 weights unpacked.
    // A GGUF file's blocks are multiplied as stored by resident and streamed layers alike (the tiers keep the blocks);
    // with auto the backend computes in fp32 around them, streamed or not, so both give the same logits.
    quantized = o.gguf && o.description.positions.kind === 'rope' ? ggufQuantizedWeights(o.gguf, o.description) : undefined;
    if (quantized && Object.keys(quantized.counts).length === 0) quantized = undefined;
    const dtype = quantized && decision.streamedAuto ? 'auto' : decision.dtype;
    const selection = selectBackend({ dtype, experimental: dtype === 'int8', ...(quantized ? { quantized } : {}) });
    if (quantized && selection.kind === 'onednn') log(`backend: ${Object.entries(quantized.counts).map(([t, n]) => `${n} ${t}`).join(', ')} matrices of ${o.gguf} multiplied as stored (ggml blocks), not widened${allResident ? '' : ', streamed as blocks'}`);
    else quantized = undefined;
    compute = selection.backend;
    log(decision.streamedAuto && selection.kind === 'onednn' && !quantized ? `${selection.notice} (--compute-dtype auto with streamed layers: bf16 without the first-batch gate, which needs every layer resident; --compute-dtype fp32 for onnxruntime)` : selection.notice);
  }
  const memory = requestMemoryBudget(shape, policy, o.maxRam, decision.library === 'onednn' ? 'f16' : 'fp32');
  const load = async (inner: DecoderBackend): Promise<{ engine: Engine; backend: DecoderBackend; inner: DecoderBackend }> => {
    let backend: DecoderBackend = inner;
    if (!allResident) {
      try {
        backend = new OffloadingBackend(inner, policy, { offloadDir: o.offloadDir });
      } catch (err) {
        throw new EngineSetupError(err instanceof Error ? err.message : String(err));
      }
      log(`backend: weights stream from the host and disk tiers into ${inner.name}`);
    }
    // A GGUF model's weights are read from the file itself (its folder holds the config and tokenizer only).
    const engine = o.gguf ? await Engine.fromSource(o.description, new GgufTensorSource(o.gguf), { backend, memory }) : await Engine.load(o.folder, o.configOverride ? { config: o.description, backend, memory } : { backend, memory });
    return { engine, backend, inner };
  };
  let loaded: { engine: Engine; backend: DecoderBackend; inner: DecoderBackend } | undefined;
  let refused: UnsupportedKindsError | undefined;
  // A family the chosen backend does not compute yet (its init refuses the kinds, before any work) falls back, so the
  // default command never stops there: oneDNN → onnxruntime fp32 → the reference backend, which computes every kind.
  const tried = new Set<string>();
  for (const make of [() => compute, () => new OrtBackend(), () => new ReferenceBackend()]) {
    const inner = make();
    if (tried.has(inner.name)) continue;
    tried.add(inner.name);
    if (refused) {
      log(`backend: ${refused.message.split(';')[0]}; computing with ${inner.name} instead`);
      // Its streamed layers arrive as float32 copies, and it holds no blocks: the plan must still fit.
      if (!allResident || shape.family?.held) plan = planFor(inner.streamedLayers?.acceptsF16 ? 'f16' : 'fp32', modelShapeOfDescription(o.description));
    }
    try {
      loaded = await load(inner);
      break;
    } catch (err) {
      if (!(err instanceof UnsupportedKindsError) || err.backend === 'offloading') throw err instanceof UnsupportedKindsError ? new EngineSetupError(err.message) : err;
      refused = err;
    }
  }
  if (!loaded) throw new EngineSetupError(refused!.message);
  const { engine, backend, inner: loadedInner } = loaded!;
  if (backend instanceof OffloadingBackend) log(formatTierSummary(backend.summary()));
  const fingerprint = await timePhase('session.model-fingerprint', () => modelFingerprint(o.folder));
  // The blocks compute other logits than the widened weights: a request cache keeps them apart.
  const heldBlocks = quantized !== undefined && loadedInner === compute;
  return { engine, backend, plan, heldBlocks, modelId: `${o.model}@${fingerprint}/${backend.name}${heldBlocks ? '+ggml-blocks' : ''}` };
}
