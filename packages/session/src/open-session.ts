import { isAbsolute, join, resolve } from 'node:path';
import { ModelFileError, readOptConfig, type OptBackend, type OptConfig, type OptEngine } from '@flexhelm/engine';
import { checkOffloadDir, type MemoryPlan, type Policy } from '@flexhelm/offload';
import { effectiveBudget, type MachineProfile, type SearchWorkload } from '@flexhelm/policy-search';
import { RequestCache } from '@flexhelm/request-cache';
import { CachingExecutor, EngineExecutor, resolveModel } from '@flexhelm/runner';
import { localOptWindowService, loadTokenizerFolder, type LocalWindowService, type HuggingFaceTokenizer } from '@flexhelm/tokenizer';
import { isComputeDtype, type ComputeDtype } from './decide-backend.js';
import { helmModelName } from './model-names.js';
import { modelShapeOf, openEngine } from './open-engine.js';
import { autoParts, integerValue, maxRamBytes, OptionError, policyFromRequest, searchedPolicy, withPlaceholders, fixedChoices, type AutoParts, type PolicyRequest } from './policy-request.js';

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
  /** The workload the policy is searched and the memory plan checked for, given the model's config. */
  workload: (config: OptConfig, padToSeqLen: number | undefined) => SearchWorkload;
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
  config: OptConfig;
  policy: Policy;
  profile?: MachineProfile;
  engine: OptEngine;
  backend: OptBackend;
  modelId: string;
  plan: MemoryPlan;
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
  if (!isComputeDtype(computeDtype)) throw new OptionError(`--compute-dtype takes auto, fp32, bf16 or int8, got '${computeDtype}'`);
  const offloadDir = resolve(o.offloadDir ?? join(o.dataDir, 'offload'));
  return { helmModel: helmModelName(o.model), auto, policy, maxRam: maxRamBytes(o.maxRamGiB), offloadDir, computeDtype };
}

/**
 * Opens a model for requests, in the order every entry point needs: cheap checks, the model's files, the policy
 * (searched for `auto` parts), the request cache, and only then the engine, so a refused session leaves nothing open.
 */
export async function openSession(o: SessionOptions): Promise<Session> {
  const log = o.log ?? (() => {});
  const checked = checkSessionOptions(o);
  let resolved;
  try {
    resolved = await resolveModel({ model: o.model, path: o.path, dataDir: o.dataDir, offline: Boolean(o.offline), log });
  } catch (err) {
    if (err instanceof ModelFileError) throw err; // one line naming the file
    throw new OptionError((err as Error).message);
  }
  const config = resolved.config ?? readOptConfig(resolved.folder);
  const tokenizer = loadTokenizerFolder(resolved.folder, o.model);
  const padToSeqLen = integerValue(o.padToSeqLen, 'pad-to-seq-len', 1);
  if (padToSeqLen !== undefined && padToSeqLen > config.maxPositionEmbeddings) throw new OptionError(`--pad-to-seq-len ${padToSeqLen} is beyond the model's ${config.maxPositionEmbeddings} positions`);
  const workload = o.workload(config, padToSeqLen);
  let policy = checked.policy;
  let profile: MachineProfile | undefined;
  if (checked.auto) {
    const maxRam = effectiveBudget(checked.maxRam, checked.offloadDir).maxRam;
    ({ policy, profile } = await searchedPolicy(o.policy, checked.auto, { config, shape: modelShapeOf(config), workload, dataDir: o.dataDir, offloadDir: checked.offloadDir, maxRam, computeDtype: checked.computeDtype, log }));
  } else checkOffloadDir(policy, checked.offloadDir);
  // The cache before the engine: a damaged one is reported before the engine starts (an open engine keeps the process alive).
  const cache = RequestCache.open(isAbsolute(o.cachePath) ? o.cachePath : resolve(o.cachePath));
  let opened;
  try {
    opened = await openEngine({ model: o.model, folder: resolved.folder, config, configOverride: Boolean(resolved.config), policy, offloadDir: checked.offloadDir, maxRam: checked.maxRam, workload, computeDtype: checked.computeDtype, log });
  } catch (err) {
    cache.close();
    throw err;
  }
  const { engine } = opened;
  const modelId = o.modelId ? o.modelId(resolved.folder, opened.modelId) : opened.modelId;
  const seed = o.seed ?? 0;
  const batch = policy.gpuBatchSize * policy.numGpuBatches;
  const executor = new CachingExecutor(new EngineExecutor(engine, tokenizer, { modelId, maxBatchSize: batch, seed, padToSeqLen }), cache, Math.max(8, batch));
  let closing: Promise<void> | undefined;
  return {
    modelName: o.model, helmModel: checked.helmModel, folder: resolved.folder, config, policy, profile,
    engine, backend: opened.backend, modelId, plan: opened.plan, tokenizer,
    windowService: localOptWindowService(tokenizer, config.maxPositionEmbeddings), cache, executor, padToSeqLen,
    close: () => (closing ??= (async () => {
      cache.close();
      await engine.close();
    })()),
  };
}
