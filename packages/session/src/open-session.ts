import { join, resolve } from 'node:path';
import { familyEntry, ModelFileError, timePhase, readFolderModel, type ModelDescription, type DecoderBackend, type Engine } from '@flexhelm/engine';
import { BudgetError, checkOffloadDir, PolicyError, type MemoryPlan, type ModelShape, type Policy } from '@flexhelm/offload';
import { checkPredictedFit, effectiveBudget, loadProfile, type MachineProfile, type SearchWorkload } from '@flexhelm/policy-search';
import { RequestCache } from '@flexhelm/request-cache';
import { CachingExecutor, EngineExecutor, resolveModel } from '@flexhelm/runner';
import { localOptWindowService, loadTokenizerFolder, modelFolderWindowService, type LocalWindowService, type HuggingFaceTokenizer } from '@flexhelm/tokenizer';
import { computeDtypeRefusal, costPathFor, isComputeDtype, type ComputeDtype } from './decide-backend.js';
import { helmModelName } from './model-names.js';
import { openEngine, type OpenedEngine } from './open-engine.js';
import { planShape } from './plan-shape.js';
import { autoParts, fixedChoices, integerValue, maxRamBytes, OptionError, policyFromRequest, searchedPolicy, SessionInputError, withPlaceholders, type AutoParts, type PolicyRequest } from './policy-request.js';

export interface SessionOptions {
  /** The model as the user named it (`opt-1.3b`, `facebook/opt-1.3b`, a local name). */
  model: string;
  /** FlexLLMGen's `--path`: the weights folder. */
  path?: string;
  dataDir: string;
  offline?: boolean;
  policy: PolicyRequest;
  /** What an absent `percent` means: searched (`flexhelm run`) or every weight resident (worker, server). */
  percentDefault?: 'auto' | 'resident';
  /** Default `<dataDir>/offload`. */
  offloadDir?: string;
  /** GiB (default 80% of this machine's memory). */
  maxRamGiB?: string | number;
  computeDtype?: string;
  /** `--pad-to-seq-len`, checked against the model's positions. */
  padToSeqLen?: string | number;
  /** The workload the policy is searched and the memory plan checked for, given the model's description. */
  workload: (description: ModelDescription, padToSeqLen: number | undefined) => SearchWorkload;
  seed?: number;
  cachePath: string;
  /** The request cache's model identity; default the engine's (model, weights fingerprint and backend). */
  modelId?: (folder: string, engineModelId: string) => string;
  log?: (line: string) => void;
}

/** The values a session is opened with, checked without touching the model (every problem before any work). */
export interface CheckedSessionOptions {
  helmModel: string;
  auto: AutoParts | undefined;
  /** The policy with stand-ins for `auto` parts until the search fills them. */
  policy: Policy;
  maxRam: number;
  offloadDir: string;
  computeDtype: ComputeDtype;
}

export interface Session {
  modelName: string;
  helmModel: string;
  folder: string;
  description: ModelDescription;
  /**
   * The shape the policy was searched and the memory planned for (`planShape`: `modelShapeOfDescription` of the model's
   * description, the profile's key, with a GGUF file's blocks at their size): the one shape every cost prediction about
   * this session must use.
   */
  shape: ModelShape;
  policy: Policy;
  profile?: MachineProfile;
  engine: Engine;
  backend: DecoderBackend;
  modelId: string;
  plan: MemoryPlan;
  /** The layers multiply a GGUF file's blocks as stored (`OpenedEngine.heldBlocks`). */
  heldBlocks: boolean;
  tokenizer: HuggingFaceTokenizer;
  windowService: LocalWindowService;
  cache: RequestCache;
  executor: CachingExecutor;
  padToSeqLen?: number;
  /** Closes the cache and the engine (idempotent); every way out of a session must call it. */
  close(): Promise<void>;
}

/** The cheap checks of `openSession`: the policy request, the budget, the dtype and the offload folder. */
export function checkSessionOptions(o: Pick<SessionOptions, 'model' | 'dataDir' | 'policy' | 'percentDefault' | 'offloadDir' | 'maxRamGiB' | 'computeDtype'>): CheckedSessionOptions {
  const auto = autoParts(o.policy, o.percentDefault ?? 'auto');
  const policy = policyFromRequest(auto ? withPlaceholders(o.policy, auto) : o.policy);
  if (auto) fixedChoices(o.policy, auto);
  const computeDtype = o.computeDtype ?? 'auto';
  const refusal = computeDtypeRefusal(computeDtype);
  if (refusal !== undefined || !isComputeDtype(computeDtype)) throw new OptionError(refusal);
  const offloadDir = resolve(o.offloadDir ?? join(o.dataDir, 'offload'));
  try {
    if (!auto) checkOffloadDir(policy, offloadDir);
  } catch (err) {
    // The folder, not the command line, is what to fix: one line.
    if (err instanceof PolicyError) throw new SessionInputError(err.problems.join('; '));
    throw err;
  }
  return { helmModel: helmModelName(o.model), auto, policy, maxRam: maxRamBytes(o.maxRamGiB), offloadDir, computeDtype };
}

/** A model resolved and its policy settled, before any cache or engine is open (what a coordinator needs). */
export interface PreparedSession {
  options: SessionOptions;
  checked: CheckedSessionOptions;
  folder: string;
  /** The GGUF file `folder` was converted from, when it was. */
  gguf?: string;
  /** The model's description (OPT's from its config; the Llama family's from config.json's `model_type`). */
  description: ModelDescription;
  /** The shape the memory plan and the policy search size (GQA's KV heads, SwiGLU, no position table for Llama). */
  shape: ModelShape;
  /** The config came from the model's name, not a config.json (numpy folders, the embedded model). */
  configOverride: boolean;
  padToSeqLen?: number;
  workload: SearchWorkload;
  policy: Policy;
  profile?: MachineProfile;
}

/**
 * Resolves the model and settles the policy: the `auto` parts are searched (unless `search` is false, as for a
 * coordinator that computes nothing: the stand-ins stay), and with `checkFit` a fixed policy that the cost model
 * predicts will not fit is refused before loading, with the numbers and one that fits.
 */
export async function prepareSession(o: SessionOptions, checked = checkSessionOptions(o), stage: { search?: boolean; checkFit?: boolean } = {}): Promise<PreparedSession> {
  const log = o.log ?? (() => {});
  let resolved: Awaited<ReturnType<typeof resolveModel>>;
  try {
    resolved = await resolveModel({ model: o.model, path: o.path, dataDir: o.dataDir, offline: Boolean(o.offline), log });
  } catch (err) {
    if (err instanceof ModelFileError) throw err; // one line naming the file
    throw new OptionError((err as Error).message);
  }
  const description = readSessionModel(resolved.folder, resolved.config);
  const padToSeqLen = integerValue(o.padToSeqLen, 'pad-to-seq-len', 1);
  if (padToSeqLen !== undefined && padToSeqLen > description.maxPositions) throw new OptionError(`--pad-to-seq-len ${padToSeqLen} is beyond the model's ${description.maxPositions} positions`);
  const workload = o.workload(description, padToSeqLen);
  let policy = checked.policy;
  let profile: MachineProfile | undefined;
  const shape = planShape(description, resolved.gguf, checked.computeDtype);
  const budget = effectiveBudget(checked.maxRam, checked.offloadDir);
  if (checked.auto && stage.search !== false) {
    ({ policy, profile } = await searchedPolicy(o.policy, checked.auto, { description, shape, workload, dataDir: o.dataDir, offloadDir: checked.offloadDir, maxRam: budget.maxRam, computeDtype: checked.computeDtype, log }));
  } else if (stage.checkFit) {
    profile = loadProfile(o.dataDir);
    try {
      checkPredictedFit(shape, policy, workload, budget, profile, profile ? { backend: costPathFor(checked.computeDtype, profile, undefined, shape) } : {});
    } catch (err) {
      if (err instanceof BudgetError) throw new OptionError(err.message);
      throw err;
    }
  }
  return { options: o, checked, folder: resolved.folder, ...(resolved.gguf ? { gguf: resolved.gguf } : {}), description, shape, configOverride: Boolean(resolved.config), padToSeqLen, workload, policy, profile };
}

/**
 * The model of a folder: the one its name gave (numpy folders), else read through its family entry
 * (`readFolderModel`: OPT's own reader also when config.json has no `model_type`; an unknown `model_type` or setting
 * is refused naming the field).
 */
function readSessionModel(folder: string, resolved: ModelDescription | undefined): ModelDescription {
  return resolved ?? readFolderModel(folder);
}

/**
 * Opens the request cache, then the engine (a damaged cache is reported before the engine starts; a refused engine
 * closes the cache), then the tokenizer, window service and executor.
 */
export async function startSession(p: PreparedSession): Promise<Session> {
  const { options: o, checked, policy } = p;
  const log = o.log ?? (() => {});
  const cache = await timePhase('session.request-cache', () => RequestCache.open(resolve(o.cachePath)));
  let opened: OpenedEngine | undefined;
  let tokenizer: HuggingFaceTokenizer | undefined;
  try {
    opened = await timePhase('session.engine', () => openEngine({ model: o.model, folder: p.folder, gguf: p.gguf, description: p.description, shape: p.shape, configOverride: p.configOverride, policy, offloadDir: checked.offloadDir, maxRam: checked.maxRam, workload: p.workload, computeDtype: checked.computeDtype, log }));
    // After the weights: a damaged weights file is reported as such even when the tokenizer files are missing too.
    tokenizer = await timePhase('session.tokenizer', () => loadTokenizerFolder(p.folder, o.model));
  } catch (err) {
    cache.close();
    await opened?.engine.close();
    throw err;
  }
  const { engine } = opened;
  const modelId = o.modelId ? o.modelId(p.folder, opened.modelId) : opened.modelId;
  const batch = policy.gpuBatchSize * policy.numGpuBatches;
  const executor = new CachingExecutor(new EngineExecutor(engine, tokenizer, { modelId, maxBatchSize: batch, seed: o.seed ?? 0, padToSeqLen: p.padToSeqLen }), cache, Math.max(8, batch));
  let closing: Promise<void> | undefined;
  return {
    modelName: o.model, helmModel: checked.helmModel, folder: p.folder, description: p.description, shape: p.shape, policy, profile: p.profile,
    engine, backend: opened.backend, modelId, plan: opened.plan, heldBlocks: opened.heldBlocks, tokenizer,
    windowService: windowServiceFor(p, tokenizer), cache, executor, padToSeqLen: p.padToSeqLen,
    close: () => (closing ??= (async () => {
      cache.close();
      await engine.close();
    })()),
  };
}

/**
 * The family entry's window: HELM's `LocalOPTWindowService` for OPT (`</s>`, max_position_embeddings); the others take
 * their window, EOS and BOS tokens from the model folder (config.json, tokenizer_config.json, generation_config.json).
 */
function windowServiceFor(p: PreparedSession, tokenizer: HuggingFaceTokenizer): LocalWindowService {
  if (familyEntry(p.description.family).tokens.window === 'helm-opt') return localOptWindowService(tokenizer, p.description.maxPositions);
  return modelFolderWindowService(p.folder, tokenizer);
}

/**
 * Opens a model for requests, in the order every entry point needs: cheap checks (`checkSessionOptions`), the model
 * and the policy (`prepareSession`), then the cache and the engine (`startSession`), so a refused session leaves
 * nothing open. Entry points with work in between (`flexhelm run` fetches its datasets first) call the stages.
 */
export async function openSession(o: SessionOptions): Promise<Session> {
  return timePhase('session.start', async () => startSession(await timePhase('session.prepare', () => prepareSession(o))));
}
