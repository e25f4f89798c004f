import { totalmem } from 'node:os';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RunEntry } from '@flexhelm/core';
import { resolveDataDir } from '@flexhelm/downloads';
import { ModelFileError, readOptConfig, type OptConfig } from '@flexhelm/engine';
import { BudgetError, checkOffloadDir, parsePolicy, percentsFromArgs, PolicyError, type ModelShape, type Policy } from '@flexhelm/offload';
import { autoPolicy, checkPredictedFit, computePathFor, describeSearch, DriftMonitor, effectiveBudget, loadProfile, NoPolicyFitsError, stepCost, type MachineProfile, type SearchWorkload } from '@flexhelm/policy-search';
import { RequestCache } from '@flexhelm/request-cache';
import {
  CachingExecutor,
  COMPUTE_DTYPES,
  EngineSetupError,
  openEngine,
  type ComputeDtype,
  type OpenedEngine,
  type OpenEngineOptions,
  DEFAULT_MODEL,
  EngineExecutor,
  fetchRunData,
  formatMetricTable,
  headlineMetrics,
  loadBiasWordLists,
  type BiasWordLists,
  modelShapeOf,
  ProgressReporter,
  resolveModel,
  runOne,
} from '@flexhelm/runner';
import { descriptionForModel, readRunEntries, registerLocalModel, runEntriesToRunSpecs } from '@flexhelm/run-spec';
import { localOptWindowService, loadTokenizerFolder } from '@flexhelm/tokenizer';
import type { Command, CommandContext } from '../command.js';
import { DATA_MIRROR_OPTIONS, dataMirrorOption } from '../data-mirror-option.js';
import { checkWritableFolder } from '../check-writable-folder.js';
import { diskFullMessage } from '../disk-full-message.js';
import { exitOnInterrupt } from '../exit-on-interrupt.js';
import { integerOption } from '../option-values.js';
import { InputError } from '../usage-error.js';
import { runViaQueue } from './queue-run.js';

const GiB = 1024 ** 3;

function numberOption(value: unknown, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (String(value).trim() === '' || !Number.isFinite(n) || n <= 0) throw new InputError(`--${flag} must be a positive number of GiB (e.g. --${flag} 16), got '${String(value)}'`);
  return n;
}

/** The offload policy from the options `run` and `worker` share (FlexLLMGen's flags); a bad value is a usage error. */
export function policyFromOptions(options: CommandContext['options'], usageError: CommandContext['usageError']): Policy {
  try {
    return parsePolicy({
      gpuBatchSize: integerOption(options['gpu-batch-size'], 'gpu-batch-size', 1) ?? 4,
      numGpuBatches: integerOption(options['num-gpu-batches'], 'num-gpu-batches', 1) ?? 1,
      ...percentsFromArgs(options.percent === undefined ? [100, 0, 100, 0, 100, 0] : String(options.percent).trim().split(/\s+/)),
      pinWeight: options['pin-weight'] === undefined ? true : Boolean(options['pin-weight']),
      cpuCacheCompute: Boolean(options['cpu-cache-compute']),
      compressWeight: Boolean(options['compress-weight']),
      compressCache: Boolean(options['compress-cache']),
    });
  } catch (err) {
    if (err instanceof PolicyError) throw usageError(err.message);
    throw err;
  }
}

/** `--max-ram` in bytes (default 80% of this machine's memory). */
export function maxRamFromOptions(options: CommandContext['options']): number {
  return (numberOption(options['max-ram'], 'max-ram') ?? (totalmem() * 0.8) / GiB) * GiB;
}

/** Which policy choices the search makes: `--percent auto` (the default), `--gpu-batch-size auto`, `--num-gpu-batches auto`. */
export function autoChoices(options: CommandContext['options']): { percent: boolean; gpuBatchSize: boolean; numGpuBatches: boolean } | undefined {
  const isAuto = (v: unknown) => typeof v === 'string' && v.trim() === 'auto';
  const percent = options.percent === undefined || isAuto(options.percent);
  // With the placement searched, unset batch sizes are searched too; with fixed percents they keep their defaults.
  const gpuBatchSize = isAuto(options['gpu-batch-size']) || (percent && options['gpu-batch-size'] === undefined);
  const numGpuBatches = isAuto(options['num-gpu-batches']) || (percent && options['num-gpu-batches'] === undefined);
  return percent || gpuBatchSize || numGpuBatches ? { percent, gpuBatchSize, numGpuBatches } : undefined;
}

type Choices = Pick<Policy, 'gpuBatchSize' | 'numGpuBatches' | 'wGpuPercent' | 'wCpuPercent' | 'cacheGpuPercent' | 'cacheCpuPercent' | 'actGpuPercent' | 'actCpuPercent' | 'compressWeight'>;
/** Stand-ins for the `auto` parts while the other options are checked (FlexLLMGen's defaults; what `--queue` uses). */
const PLACEHOLDER: Choices = { gpuBatchSize: 4, numGpuBatches: 1, wGpuPercent: 100, wCpuPercent: 0, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight: false };

/** The options with the search's choices written in place of the `auto` parts (policyFromOptions then builds the policy). */
function withChoices(options: CommandContext['options'], auto: NonNullable<ReturnType<typeof autoChoices>>, p: Choices): CommandContext['options'] {
  const out = { ...options };
  if (auto.percent) {
    out.percent = [p.wGpuPercent, p.wCpuPercent, p.cacheGpuPercent, p.cacheCpuPercent, p.actGpuPercent, p.actCpuPercent].join(' ');
    if (options['compress-weight'] === undefined) out['compress-weight'] = p.compressWeight;
  }
  if (auto.gpuBatchSize) out['gpu-batch-size'] = String(p.gpuBatchSize);
  if (auto.numGpuBatches) out['num-gpu-batches'] = String(p.numGpuBatches);
  return out;
}

/** The options with the `auto` parts replaced by stand-ins, so every other problem is reported before any work starts. */
export function withPlaceholders(options: CommandContext['options'], auto: NonNullable<ReturnType<typeof autoChoices>>): CommandContext['options'] {
  return withChoices(options, auto, PLACEHOLDER);
}

/** The `auto` parts of the policy searched for `workload` (profiling this machine on first use); prints the choice and the runner-up. */
export async function searchedPolicy(
  options: CommandContext['options'],
  auto: NonNullable<ReturnType<typeof autoChoices>>,
  o: Pick<CommandContext, 'stderr' | 'usageError'> & { config: OptConfig; shape: ModelShape; workload: SearchWorkload; dataDir: string; offloadDir: string; maxRam: number },
): Promise<{ policy: Policy; profile: MachineProfile }> {
  try {
    const chosen = await autoPolicy({
      config: o.config, shape: o.shape, workload: o.workload, dataDir: o.dataDir, offloadDir: o.offloadDir, maxRam: o.maxRam,
      backendFor: (p) => computePathFor(options['compute-dtype'] as string | undefined, p),
      fixed: fixedChoices(options, auto, o.usageError), log: (m) => o.stderr.write(`${m}\n`),
    });
    for (const line of describeSearch(chosen.result)) o.stderr.write(`${line}\n`);
    const policy = policyFromOptions(withChoices(options, auto, chosen.result.best.policy), o.usageError);
    checkOffloadDir(policy, o.offloadDir);
    return { policy, profile: chosen.profile };
  } catch (err) {
    if (err instanceof PolicyError && err.problems.length === 1) throw new InputError(err.problems[0]!);
    if (err instanceof NoPolicyFitsError || err instanceof PolicyError) throw o.usageError(err.message);
    throw err;
  }
}

/** `--max-ram`, `--offload-dir` and `--compute-dtype` with the policy: the engine `run` and `worker` compute with. */
export async function openEngineFromOptions(
  options: CommandContext['options'],
  target: Omit<OpenEngineOptions, 'offloadDir' | 'maxRam' | 'computeDtype'> & { dataDir: string },
  usageError: CommandContext['usageError'],
): Promise<OpenedEngine> {
  const maxRam = maxRamFromOptions(options);
  const offloadDir = resolve((options['offload-dir'] as string | undefined) ?? join(target.dataDir, 'offload'));
  // Default auto: oneDNN where it runs fast (bf16 when it passes the accuracy gate), onnxruntime fp32 otherwise.
  const computeDtype = (options['compute-dtype'] as string | undefined) ?? 'auto';
  if (!COMPUTE_DTYPES.includes(computeDtype as ComputeDtype)) throw usageError(`--compute-dtype takes auto, fp32, bf16 or int8, got '${computeDtype}'`);
  try {
    return await openEngine({ ...target, offloadDir, maxRam, computeDtype: computeDtype as ComputeDtype });
  } catch (err) {
    if (err instanceof EngineSetupError) throw usageError(err.message);
    const full = diskFullMessage(err, offloadDir);
    if (full) throw usageError(full);
    throw err;
  }
}

/** `--pad-to-seq-len N` (helm_run.py's fixed prompt shape), checked against the model's positions. */
export function padToSeqLenOption(options: CommandContext['options'], maxPositions: number, usageError: CommandContext['usageError']): number | undefined {
  const n = integerOption(options['pad-to-seq-len'], 'pad-to-seq-len', 1);
  if (n !== undefined && n > maxPositions) throw usageError(`--pad-to-seq-len ${n} is beyond the model's ${maxPositions} positions`);
  return n;
}

/** `flexhelm run`: FlexLLMGen's helm_run.py, complete: every run spec, every metric, real logprobs, resumable. */
export const runCommand: Command = {
  name: 'run',
  summary: 'Run HELM evaluations on a local OPT model and write HELM’s five files per run (resumable)',
  options: {
    description: { type: 'string', short: 'd', multiple: true, valueName: 'D', description: 'a run entry, e.g. mmlu:subject=philosophy,model=text,data_augmentation=canonical (repeatable)' },
    'conf-path': { type: 'string', multiple: true, valueName: 'FILE', description: 'a HOCON file of run entries' },
    model: { type: 'string', valueName: 'M', description: `the OPT model, e.g. facebook/opt-30b (default: the embedded ${DEFAULT_MODEL}, made on first use)` },
    path: { type: 'string', valueName: 'DIR', description: 'folder with the weights (Hugging Face layout, or FlexLLMGen <name>-np folders); default: the download cache' },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder (default benchmark_output)' },
    suite: { type: 'string', valueName: 'S', description: 'suite name: runs go to <output-path>/runs/<suite>/<run name> (default v1)' },
    'offload-dir': { type: 'string', valueName: 'DIR', description: 'where disk-tier data goes (default <data-dir>/offload)' },
    'gpu-batch-size': { type: 'string', valueName: 'N|auto', description: 'sequences per compute call (default: searched with --percent auto, else 4)' },
    'num-gpu-batches': { type: 'string', valueName: 'N|auto', description: 'micro-batches sharing one weight load (default: searched with --percent auto, else 1)' },
    percent: { type: 'string', nargs: 6, valueName: 'WG WC CG CC HG HC', description: 'placement percents of weights, KV cache, activations on compute/host (rest on disk), or auto (default): the cost model picks the fastest policy that fits --max-ram (`flexhelm profile` shows what it knows)' },
    'pin-weight': { type: 'boolean', description: 'keep host-tier weights in pinned memory (FlexLLMGen default)' },
    'cpu-cache-compute': { type: 'boolean', description: 'compute attention where the KV cache lives' },
    'compress-weight': { type: 'boolean', description: '4-bit group-wise weight compression' },
    'compress-cache': { type: 'boolean', description: '4-bit group-wise KV-cache compression' },
    'max-ram': { type: 'string', valueName: 'GIB', description: 'RAM budget for the model, cache and workspace (default 80% of this machine’s memory)' },
    'pad-to-seq-len': { type: 'string', valueName: 'N', description: 'left-pad engine batches to a fixed prompt length, at most N (the longest prompt rounded up to 256), as helm_run.py; a longer prompt is an error' },
    'max-eval-instances': { type: 'string', short: 'm', valueName: 'N', description: 'eval instances per run (default: the run spec’s)' },
    'num-train-trials': { type: 'string', short: 't', valueName: 'T', description: 'in-context example draws (default 3, as helm_run.py)' },
    seed: { type: 'string', valueName: 'S', description: 'added to every sampled request’s seed (default 0)' },
    'data-dir': { type: 'string', valueName: 'DIR', description: 'downloaded models and datasets (default $FLEXHELM_DATA_DIR or ~/.cache/flexhelm)' },
    'cache-path': { type: 'string', valueName: 'FILE', description: 'request cache (default <output-path>/cache/<model>.sqlite)' },
    offline: { type: 'boolean', description: 'never download: a missing model or dataset is an error saying where to put it' },
    'compute-dtype': { type: 'string', valueName: 'auto|fp32|bf16|int8', description: 'auto (default: oneDNN bf16 where the CPU has AMX or AVX-512 and bf16 passes the accuracy gate on the first batch, else fp32; with offloaded layers bf16 without the gate; onnxruntime fp32 without oneDNN), fp32 (onnxruntime, exact), bf16, int8 (experimental)' },
    ...DATA_MIRROR_OPTIONS,
    'skip-completed-runs': { type: 'boolean', description: 'skip runs whose five files already exist' },
    queue: { type: 'string', valueName: 'URL', description: 'distribute the requests to `flexhelm worker`s through Redis: redis://HOST:PORT[/DB]' },
    'shard-size': { type: 'string', valueName: 'N', description: 'with --queue: requests per shard, rounded up to whole batches (default 4 batches)' },
  },
  details: [
    'Each description expands to RunSpecs exactly as HELM 0.2.1 does, with its model= argument (e.g. model=text)',
    'replaced by --model, so the run names say which model ran. Requests are cached as each batch completes: a run',
    'killed at any point restarts where it stopped and writes the same files as an uninterrupted run.',
    '',
    'examples:',
    '  flexhelm run -d synthetic_reasoning:mode=pattern_match -m 20',
    '  flexhelm run -d "mmlu:subject=philosophy,model=text,data_augmentation=canonical" --model facebook/opt-30b \\',
    '      --percent 20 80 0 100 0 100 --gpu-batch-size 48 --num-gpu-batches 3',
  ].join('\n'),
  async run({ options, stdout, stderr, usageError }) {
    const descriptions = (options.description as string[] | undefined) ?? [];
    const confPaths = (options['conf-path'] as string[] | undefined) ?? [];
    if (descriptions.length === 0 && confPaths.length === 0) throw usageError('give at least one --description D or --conf-path FILE');
    const model = (options.model as string | undefined) ?? DEFAULT_MODEL;
    const outputPath = resolve((options['output-path'] as string | undefined) ?? 'benchmark_output');
    const suite = (options.suite as string | undefined) ?? 'v1';
    const dataDir = resolveDataDir({ dataDir: options['data-dir'] as string | undefined });
    const offline = Boolean(options.offline);
    const dataMirror = dataMirrorOption(options);

    // Policy first: every problem is reported before any work starts (`auto` parts are checked with placeholders).
    const requested = autoChoices(options);
    // The coordinator of --queue computes nothing: its batches follow the defaults, each worker has its own policy.
    const auto = options.queue === undefined ? requested : undefined;
    let policy = policyFromOptions(requested ? withPlaceholders(options, requested) : options, usageError);
    if (requested) fixedChoices(options, requested, usageError);
    const maxRam = maxRamFromOptions(options);
    const offloadDir = resolve((options['offload-dir'] as string | undefined) ?? join(dataDir, 'offload'));
    try {
      if (!auto) checkOffloadDir(policy, offloadDir);
    } catch (err) {
      // The folder, not the command line, is what to fix: one line, no --help hint.
      if (err instanceof PolicyError) throw new InputError(err.problems.join('; '));
      throw err;
    }

    try {
      registerLocalModel(model.includes('/') ? model : `facebook/${model}`);
    } catch (err) {
      throw usageError((err as Error).message);
    }
    const helmModel = model.includes('/') ? model : `facebook/${model}`;
    const entries: RunEntry[] = [
      ...descriptions.map((d) => ({ description: descriptionForModel(d, helmModel), priority: 1 })),
      ...readRunEntries(confPaths).map((e) => ({ ...e, description: descriptionForModel(e.description, helmModel) })),
    ];
    const runSpecs = runEntriesToRunSpecs(entries, {
      maxEvalInstances: integerOption(options['max-eval-instances'], 'max-eval-instances', 0),
      numTrainTrials: integerOption(options['num-train-trials'], 'num-train-trials', 1) ?? 3,
    });
    if (runSpecs.length === 0) throw usageError('the descriptions expanded to no RunSpecs');
    const seed = integerOption(options.seed, 'seed', 0) ?? 0;
    const skipCompleted = Boolean(options['skip-completed-runs']);

    // Cheap checks before anything expensive, and before the engine, so that no error path leaves it running.
    checkWritableFolder(outputPath, 'output folder', '--output-path');
    const cachePath = resolve((options['cache-path'] as string | undefined) ?? join(outputPath, 'cache', `${model.replace(/[^\w.-]+/g, '_')}.sqlite`));
    // An existing cache is checked now; a new one is created just before the engine, so a refused run leaves none.
    let cache = options.queue === undefined && existsSync(cachePath) ? RequestCache.open(cachePath) : undefined;
    let engine: OpenedEngine['engine'] | undefined;
    let closing: Promise<void> | undefined;
    const closeAll = () => (closing ??= (async () => {
      cache?.close();
      await engine?.close();
    })());
    const kept = options.queue === undefined ? `finished batches are kept in ${cachePath}` : 'the workers keep what they finished';
    const interrupt = exitOnInterrupt(stderr, `flexhelm run: interrupted; ${kept}: run the same command again to resume`, closeAll);
    try {
      // Datasets first (fail fast): a missing or unreachable one is reported before the profile, the search and the model.
      await fetchRunData(runSpecs, { outputPath, suite, dataDir: join(dataDir, 'scenarios'), offline, baseUrl: dataMirror, skipCompleted, log: (m) => stderr.write(`${m}\n`) });
      // BiasMetric counts words from HELM's own lists, fetched once (or read from FLEXHELM_HELM_SOURCE_DIR).
      let biasWordLists: BiasWordLists | undefined;
      // The --queue coordinator computes the metrics too, so it needs them as much as a single-machine run.
      if (runSpecs.some((r) => r.metric_specs.some((m) => m.class_name.endsWith('.BiasMetric')))) {
        const loaded = await loadBiasWordLists({ dataDir, offline });
        if ('unavailable' in loaded) stderr.write(`note: BiasMetric will not be computed: ${loaded.unavailable}\n`);
        else biasWordLists = loaded;
      }

      let resolved: Awaited<ReturnType<typeof resolveModel>>;
      try {
        resolved = await resolveModel({ model, path: options.path as string | undefined, dataDir, offline, log: (m) => stderr.write(`${m}\n`) });
      } catch (err) {
        if (err instanceof ModelFileError) throw err; // one line naming the file, no --help hint
        throw usageError((err as Error).message);
      }
      const config = resolved.config ?? readOptConfig(resolved.folder);

      // The workload the policy is chosen and checked for: the longest generation of the run specs, the longest prompt the
      // window allows (or --pad-to-seq-len), and about as many sequences as the runs' instances × trials.
      const maxTokens = Math.max(...runSpecs.map((r) => r.adapter_spec.max_tokens));
      const padToSeqLen = padToSeqLenOption(options, config.maxPositionEmbeddings, usageError);
      const workload: SearchWorkload = {
        promptLen: padToSeqLen ?? Math.min(512, config.maxPositionEmbeddings - maxTokens),
        genLen: Math.max(1, maxTokens),
        numSequences: Math.max(...runSpecs.map((r) => (r.adapter_spec.max_eval_instances ?? 1000) * Math.max(1, r.adapter_spec.num_train_trials))),
      };
      const shape = modelShapeOf(config);
      const budget = effectiveBudget(maxRam, offloadDir);
      let profile: MachineProfile | undefined;
      if (auto) {
        ({ policy, profile } = await searchedPolicy(options, auto, { config, shape, workload, dataDir, offloadDir, maxRam: budget.maxRam, stderr, usageError }));
      } else if (options.queue === undefined) {
        // A policy the cost model predicts will not fit is refused before loading, with the numbers and one that fits.
        profile = loadProfile(dataDir);
        try {
          checkPredictedFit(shape, policy, workload, budget, profile, profile ? { backend: computePathFor(options['compute-dtype'] as string | undefined, profile) } : {});
        } catch (err) {
          if (err instanceof BudgetError) throw usageError(err.message);
          throw err;
        }
      }

      // Distributed: this process only coordinates; `flexhelm worker`s load the model and execute the requests.
      if (options.queue !== undefined) {
        return await runViaQueue({
          queueUrl: String(options.queue),
          shardSize: integerOption(options['shard-size'], 'shard-size', 1),
          runSpecs, model, folder: resolved.folder, maxPositionEmbeddings: config.maxPositionEmbeddings,
          batch: policy.gpuBatchSize * policy.numGpuBatches, seed,
          outputPath, suite, dataDir, offline, dataMirror,
          skipCompleted, biasWordLists, stdout, stderr, usageError,
        });
      }

      cache ??= RequestCache.open(cachePath);
      // Memory plan against the budget, for the longest prompt the model allows (the actual prompts are shorter).
      const opened = await openEngineFromOptions(options, { model, folder: resolved.folder, config, configOverride: Boolean(resolved.config), policy, dataDir, workload, log: (m) => stderr.write(`${m}\n`) }, usageError);
      engine = opened.engine;
      if (profile) {
        // Step times drifting more than 50% from the cost model's prediction are reported once per phase.
        const backend = computePathFor(options['compute-dtype'] as string | undefined, profile);
        const chosen = policy;
        const watched = profile;
        new DriftMonitor(
          (s) => stepCost(shape, { ...chosen, gpuBatchSize: Math.min(chosen.gpuBatchSize, s.batch), numGpuBatches: Math.ceil(s.batch / Math.min(chosen.gpuBatchSize, s.batch)) }, watched, s.seq, s.pastLen, { backend }).ms,
          { report: (r) => stderr.write(`note: ${r.phase} steps take ${r.measuredMs.toFixed(0)} ms, ${r.ratio.toFixed(2)}× the predicted ${r.predictedMs.toFixed(0)} ms (median of ${r.steps}); the machine is busier or differs from its profile — \`flexhelm profile --refresh\` re-measures it\n`) },
        ).attach(engine.backend);
      }
      const tokenizer = loadTokenizerFolder(resolved.folder, model);
      const windowService = localOptWindowService(tokenizer, config.maxPositionEmbeddings);
      const executor = new CachingExecutor(
        new EngineExecutor(engine, tokenizer, { modelId: opened.modelId, maxBatchSize: policy.gpuBatchSize * policy.numGpuBatches, seed, padToSeqLen }),
        cache,
        Math.max(8, policy.gpuBatchSize * policy.numGpuBatches),
      );
      const reporter = new ProgressReporter(stderr as NodeJS.WritableStream & { isTTY?: boolean });
      for (const runSpec of runSpecs) {
        const result = await runOne(runSpec, {
          outputPath,
          suite,
          executor,
          windowService,
          dataDir: join(dataDir, 'scenarios'),
          offline,
          baseUrl: dataMirror,
          augmentationData: { baseDir: outputPath, offline },
          skipCompleted,
          biasWordLists,
          onEvent: (e) => reporter.event(e),
        });
        if (result.skipped) continue;
        stdout.write(`\n${runSpec.name}\n${formatMetricTable(headlineMetrics(result.stats))}`);
        const notComputed = new Set(result.notComputed.map((n) => `not computed: ${n.metric}${n.stats ? ` (${n.stats.join(', ')})` : ''}: ${n.reason}`));
        for (const line of notComputed) stdout.write(`${line}\n`);
        stdout.write(`files: ${result.runDir}\n`);
      }
    } catch (err) {
      // After Ctrl-C the cache and engine are closed under the run's feet: the errors that follow are expected.
      if (interrupt.interrupted) return 130;
      if (err instanceof EngineSetupError) throw usageError(err.message);
      // The KV cache's disk share is written during generation: a full disk can also show up here.
      const full = diskFullMessage(err, offloadDir);
      if (full) throw usageError(full);
      throw err;
    } finally {
      interrupt.dispose();
      await closeAll();
    }
  },
};

/** The choices the user fixed while others are `auto` (given numbers are kept; the search fills the rest). */
function fixedChoices(options: CommandContext['options'], auto: NonNullable<ReturnType<typeof autoChoices>>, usageError: CommandContext['usageError']) {
  const fixed: { gpuBatchSize?: number; numGpuBatches?: number; wGpuPercent?: number; wCpuPercent?: number; compressWeight?: boolean } = {};
  if (!auto.gpuBatchSize) fixed.gpuBatchSize = integerOption(options['gpu-batch-size'], 'gpu-batch-size', 1) ?? 4;
  if (!auto.numGpuBatches) fixed.numGpuBatches = integerOption(options['num-gpu-batches'], 'num-gpu-batches', 1) ?? 1;
  if (!auto.percent) {
    try {
      const p = percentsFromArgs(String(options.percent).trim().split(/\s+/));
      fixed.wGpuPercent = p.wGpuPercent;
      fixed.wCpuPercent = p.wCpuPercent;
    } catch (err) {
      if (err instanceof PolicyError) throw usageError(err.message);
      throw err;
    }
  }
  // 4-bit weights change the model's outputs: an evaluation never turns them on by itself, only --compress-weight does.
  fixed.compressWeight = Boolean(options['compress-weight']);
  return fixed;
}
