import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RunEntry, RunSpec } from '@flexhelm/core';
import { resolveDataDir } from '@flexhelm/downloads';
import { reportPhase, timePhase, type ModelDescription } from '@flexhelm/engine';
import { backendProfile, DriftMonitor, stepCost, type MachineProfile, type SearchWorkload } from '@flexhelm/policy-search';
import { RequestCache } from '@flexhelm/request-cache';
import { DEFAULT_MODEL, EngineSetupError, fetchRunData, formatMetricTable, headlineMetrics, loadBiasWordLists, ProgressReporter, type BiasWordLists, type RunEvent, runOne } from '@flexhelm/runner';
import { descriptionForModel, readRunEntries, registerLocalModel, runEntriesToRunSpecs } from '@flexhelm/run-spec';
import {
  checkSessionOptions,
  costPathFor,
  defaultCachePath,
  openSession,
  OptionError,
  prepareSession,
  SessionInputError,
  startSession,
  type PolicyRequest,
  type PreparedSession,
  type Session,
  type SessionOptions,
} from '@flexhelm/session';
import type { Command, CommandContext } from '../command.js';
import { DATA_MIRROR_OPTIONS, dataMirrorOption } from '../data-mirror-option.js';
import { checkWritableFolder } from '../check-writable-folder.js';
import { diskFullMessage } from '../disk-full-message.js';
import { AtomicWriteError } from '@flexhelm/atomic-write';
import { exitOnInterrupt } from '../exit-on-interrupt.js';
import { integerOption, modelFolderOption, PATH_ALIAS_DESCRIPTION } from '../option-values.js';
import { InputError } from '../usage-error.js';
import { runViaQueue } from './queue-run.js';

/** What is missing when BiasMetric cannot be computed, and the one way to provide it (offline, where HELM's file cannot be fetched). */
const BIAS_LISTS_MISSING =
  "BiasMetric is not computed: HELM's bias word lists could not be fetched; set FLEXHELM_HELM_SOURCE_DIR to a HELM v0.2.1 checkout (git clone -b v0.2.1 https://github.com/stanford-crfm/helm)";

/** The policy options `run`, `worker` and the server share (FlexLLMGen's flags), as the session package takes them. */
function policyRequestOf(options: CommandContext['options']): PolicyRequest {
  const text = (v: unknown) => (v === undefined ? undefined : String(v));
  const flag = (v: unknown) => (v === undefined ? undefined : Boolean(v));
  return {
    percent: text(options.percent), gpuBatchSize: text(options['gpu-batch-size']), numGpuBatches: text(options['num-gpu-batches']),
    pinWeight: flag(options['pin-weight']), cpuCacheCompute: flag(options['cpu-cache-compute']),
    compressWeight: flag(options['compress-weight']), compressCache: flag(options['compress-cache']),
  };
}

/** The session's errors as the CLI reports them: option mistakes with the --help hint, folder problems in one line. */
async function asCliErrors<T>(work: () => T | Promise<T>, usageError: CommandContext['usageError'], offloadDir?: string): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof OptionError || err instanceof EngineSetupError) throw usageError(err.message);
    if (err instanceof SessionInputError) throw new InputError(err.message);
    const full = offloadDir === undefined ? undefined : diskFullMessage(err, offloadDir);
    if (full) throw usageError(full);
    throw err;
  }
}

/** `openSession` with the options `run` and `worker` share (model folder, policy, budget, dtype, padding). */
export function openSessionFromOptions(
  options: CommandContext['options'],
  o: Omit<SessionOptions, 'path' | 'offline' | 'policy' | 'offloadDir' | 'maxRamGiB' | 'computeDtype' | 'padToSeqLen'>,
  usageError: CommandContext['usageError'],
): Promise<Session> {
  const offloadDir = resolve((options['offload-dir'] as string | undefined) ?? join(o.dataDir, 'offload'));
  return asCliErrors(
    () => openSession({
      ...o, path: options.path as string | undefined, offline: Boolean(options.offline), policy: policyRequestOf(options), offloadDir,
      maxRamGiB: options['max-ram'] as string | undefined, computeDtype: options['compute-dtype'] as string | undefined, padToSeqLen: options['pad-to-seq-len'] as string | undefined,
    }),
    usageError,
    offloadDir,
  );
}

/** `flexhelm run`: FlexLLMGen's helm_run.py, complete: every run spec, every metric, real logprobs, resumable. */
export const runCommand: Command = {
  name: 'run',
  summary: 'Run HELM evaluations on a local OPT model and write HELM’s five files per run (resumable)',
  options: {
    description: { type: 'string', short: 'd', multiple: true, valueName: 'D', description: 'a run entry, e.g. mmlu:subject=philosophy,model=text,data_augmentation=canonical (repeatable)' },
    'conf-path': { type: 'string', multiple: true, valueName: 'FILE', description: 'a HOCON file of run entries' },
    model: { type: 'string', valueName: 'M', description: `the model: a Hub id (facebook/opt-30b, meta-llama/Llama-3.2-1B), a name, a folder (Hugging Face layout, any family), or a GGUF file (or a folder holding one); repeated: every description runs for each model in turn (default: the embedded ${DEFAULT_MODEL}, made on first use)` },
    path: { type: 'string', valueName: 'DIR', description: PATH_ALIAS_DESCRIPTION },
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder (default benchmark_output)' },
    suite: { type: 'string', valueName: 'S', description: 'suite name: runs go to <output-path>/runs/<suite>/<run name> (default v1)' },
    'offload-dir': { type: 'string', valueName: 'DIR', description: 'where disk-tier data goes (default <data-dir>/offload)' },
    'gpu-batch-size': { type: 'string', valueName: 'N|auto', description: 'sequences per compute call (default: searched with --percent auto, else 4)' },
    'num-gpu-batches': { type: 'string', valueName: 'N|auto', description: 'micro-batches sharing one weight load (default: searched with --percent auto, else 1)' },
    percent: { type: 'string', nargs: 6, valueName: 'WG WC CG CC HG HC', description: 'placement percents of weights, KV cache, activations on compute/host (rest on disk), or auto (default): the cost model picks the fastest policy that fits --max-ram (`flexhelm profile` shows what it knows)' },
    'pin-weight': { type: 'boolean', description: 'accepted for FlexLLMGen command lines: host-tier weights are always pinned (mlock), its default' },
    'cpu-cache-compute': { type: 'boolean', description: 'refused (not implemented): without a GPU attention always runs on the CPU' },
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
    'compute-dtype': { type: 'string', valueName: 'auto|fp32|bf16|int8', description: 'auto (default: oneDNN bf16 where the CPU has AMX or AVX-512 and bf16 passes the accuracy gate on the first batch, else fp32; with offloaded layers bf16 without the gate; onnxruntime fp32 without oneDNN), fp32 (onnxruntime, exact), bf16, int8 (experimental: only with FLEXHELM_EXPERIMENTAL_INT8=1)' },
    ...DATA_MIRROR_OPTIONS,
    'skip-completed-runs': { type: 'boolean', description: 'skip runs whose five files already exist' },
    queue: { type: 'string', valueName: 'URL', description: 'distribute the requests to `flexhelm worker`s through Redis: redis://HOST:PORT[/DB]' },
    'shard-size': { type: 'string', valueName: 'N', description: 'with --queue: requests per shard, rounded up to whole batches (default 4 batches)' },
  },
  // `worker` shares the `model` spec but serves one model: the repetition is this command's.
  repeatable: ['model'],
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
  async run(ctx) {
    const { options, stderr, usageError } = ctx;
    const descriptions = (options.description as string[] | undefined) ?? [];
    const confPaths = (options['conf-path'] as string[] | undefined) ?? [];
    if (descriptions.length === 0 && confPaths.length === 0) throw usageError('give at least one --description D or --conf-path FILE');
    const given = (options.model as string[] | undefined) ?? [];
    // `--path DIR` alone is `--model DIR`; with --model it is FlexLLMGen's folder that holds the named model's weights.
    const path = given.length > 0 ? (options.path as string | undefined) : undefined;
    if (given.length === 0 && options.path !== undefined) modelFolderOption(options, '');
    const models = given.length > 0 ? [...new Set(given)] : [(options.path as string | undefined) ?? DEFAULT_MODEL];
    if (models.length > 1 && options['cache-path'] !== undefined) throw usageError('--cache-path holds one model\'s requests: with several --model, leave it out (each model gets <output-path>/cache/<model>.sqlite)');
    // HELM's `model=text` runs every model: each description, for each model in turn (one engine loaded at a time).
    for (const [i, model] of models.entries()) {
      if (models.length > 1) stderr.write(`flexhelm run: model ${i + 1} of ${models.length}: ${model}\n`);
      const status = await runModel(ctx, model, path);
      if (status) return status;
    }
    return 0;
  },
};

/** Every description and conf file of `flexhelm run`, for one model (`--model`, with `--path` its weights folder). */
// biome-ignore lint/suspicious/noConfusingVoidType: as Command.run, an exit status or nothing
async function runModel({ options, stdout, stderr, usageError }: CommandContext, model: string, path: string | undefined): Promise<number | void> {
  {
    const descriptions = (options.description as string[] | undefined) ?? [];
    const confPaths = (options['conf-path'] as string[] | undefined) ?? [];
    const outputPath = resolve((options['output-path'] as string | undefined) ?? 'benchmark_output');
    const suite = (options.suite as string | undefined) ?? 'v1';
    const dataDir = resolveDataDir({ dataDir: options['data-dir'] as string | undefined });
    const offline = Boolean(options.offline);
    const dataMirror = dataMirrorOption(options);

    // The workload the policy is chosen and checked for: the longest generation of the run specs, the longest prompt the
    // window allows (or --pad-to-seq-len), and about as many sequences as the runs' instances × trials.
    let runSpecs: RunSpec[] = [];
    const workload = (description: ModelDescription, padToSeqLen: number | undefined): SearchWorkload => {
      const maxTokens = Math.max(...runSpecs.map((r) => r.adapter_spec.max_tokens));
      return {
        promptLen: padToSeqLen ?? Math.min(512, description.maxPositions - maxTokens),
        genLen: Math.max(1, maxTokens),
        numSequences: Math.max(...runSpecs.map((r) => (r.adapter_spec.max_eval_instances ?? 1000) * Math.max(1, r.adapter_spec.num_train_trials))),
      };
    };
    const seed = integerOption(options.seed, 'seed', 0) ?? 0;
    const cachePath = resolve((options['cache-path'] as string | undefined) ?? defaultCachePath(outputPath, model));
    const offloadDir = resolve((options['offload-dir'] as string | undefined) ?? join(dataDir, 'offload'));
    const sessionOptions: SessionOptions = {
      model, path, dataDir, offline, policy: policyRequestOf(options), offloadDir,
      maxRamGiB: options['max-ram'] as string | undefined, computeDtype: options['compute-dtype'] as string | undefined,
      padToSeqLen: options['pad-to-seq-len'] as string | undefined, workload, seed, cachePath, log: (m) => stderr.write(`${m}\n`),
    };
    // Policy first: every problem is reported before any work starts (`auto` parts are checked with placeholders).
    const checked = await asCliErrors(() => checkSessionOptions(sessionOptions), usageError);

    try {
      registerLocalModel(checked.helmModel);
    } catch (err) {
      throw usageError((err as Error).message);
    }
    const entries: RunEntry[] = [
      ...descriptions.map((d) => ({ description: descriptionForModel(d, checked.helmModel), priority: 1 })),
      ...readRunEntries(confPaths).map((e) => ({ ...e, description: descriptionForModel(e.description, checked.helmModel) })),
    ];
    runSpecs = runEntriesToRunSpecs(entries, {
      maxEvalInstances: integerOption(options['max-eval-instances'], 'max-eval-instances', 0),
      numTrainTrials: integerOption(options['num-train-trials'], 'num-train-trials', 1) ?? 3,
    });
    if (runSpecs.length === 0) throw usageError('the descriptions expanded to no RunSpecs');
    const skipCompleted = Boolean(options['skip-completed-runs']);

    // Cheap checks before anything expensive, and before the engine, so that no error path leaves it running.
    checkWritableFolder(outputPath, 'output folder', '--output-path');
    // An existing cache is checked now (a damaged one is refused before any download or search); a new one is created
    // only when the engine opens, so a refused run leaves none.
    if (options.queue === undefined && existsSync(cachePath)) RequestCache.open(cachePath).close();
    let session: Session | undefined;
    const kept = options.queue === undefined ? `finished batches are kept in ${cachePath}` : 'the workers keep what they finished';
    const reporter = new ProgressReporter(stderr as NodeJS.WritableStream & { isTTY?: boolean });
    const interrupt = exitOnInterrupt(stderr, `flexhelm run: interrupted; ${kept}: run the same command again to resume`, async () => session?.close(), { beforeMessage: () => reporter.endLine() });
    // FLEXHELM_TIMINGS: node's start and the imports, up to here.
    reportPhase('run.startup', performance.now());
    try {
      // Datasets first (fail fast): a missing or unreachable one is reported before the profile, the search and the model.
      await timePhase('run.data', () => fetchRunData(runSpecs, { outputPath, suite, dataDir: join(dataDir, 'scenarios'), offline, baseUrl: dataMirror, skipCompleted, log: (m) => stderr.write(`${m}\n`) }));
      // BiasMetric counts words from HELM's own lists, fetched once (or read from FLEXHELM_HELM_SOURCE_DIR).
      let biasWordLists: BiasWordLists | undefined;
      // The --queue coordinator computes the metrics too, so it needs them as much as a single-machine run.
      if (runSpecs.some((r) => r.metric_specs.some((m) => m.class_name.endsWith('.BiasMetric')))) {
        const loaded = await loadBiasWordLists({ dataDir, offline });
        if ('unavailable' in loaded) stderr.write(`note: ${BIAS_LISTS_MISSING}\n`);
        else biasWordLists = loaded;
      }

      // The coordinator of --queue computes nothing: its batches follow the defaults, each worker has its own policy.
      const prepared = await timePhase('session.prepare', () => asCliErrors(() => prepareSession(sessionOptions, checked, { search: options.queue === undefined, checkFit: options.queue === undefined }), usageError, offloadDir));

      // Distributed: this process only coordinates; `flexhelm worker`s load the model and execute the requests.
      if (options.queue !== undefined) {
        return await runViaQueue({
          queueUrl: String(options.queue),
          shardSize: integerOption(options['shard-size'], 'shard-size', 1),
          runSpecs, model, folder: prepared.folder, maxPositionEmbeddings: prepared.description.maxPositions,
          batch: prepared.policy.gpuBatchSize * prepared.policy.numGpuBatches, seed,
          outputPath, suite, dataDir, offline, dataMirror,
          skipCompleted, biasWordLists, stdout, stderr, usageError,
        });
      }

      // Memory plan against the budget, for the longest prompt the model allows (the actual prompts are shorter).
      session = await timePhase('session.start', () => asCliErrors(() => startSession(prepared), usageError, offloadDir));
      // Step times drifting more than 50% from the cost model's prediction are reported once per phase; only where the
      // profile has figures for this model's shape on that backend (a fixed --percent never measures them), and not
      // for a GGUF file's blocks multiplied as stored: the profile times widened layers, so re-profiling would not help.
      const backend = prepared.profile && costPathFor(checked.computeDtype, prepared.profile, undefined, prepared.shape);
      if (prepared.profile && backend && profileCovers(prepared.profile, prepared.shape, backend) && !session.heldBlocks) {
        // The session's own shape (the profile's key): never re-derived here, where the model family is not known.
        const { policy: chosen, profile: watched, shape } = prepared;
        new DriftMonitor(
          (s) => stepCost(shape, { ...chosen, gpuBatchSize: Math.min(chosen.gpuBatchSize, s.batch), numGpuBatches: Math.ceil(s.batch / Math.min(chosen.gpuBatchSize, s.batch)) }, watched, s.seq, s.pastLen, { backend }).ms,
          { report: (r) => stderr.write(`note: ${r.phase} steps take ${r.measuredMs.toFixed(0)} ms, ${r.ratio.toFixed(2)}× the predicted ${r.predictedMs.toFixed(0)} ms (median of ${r.steps}); the machine is busier or differs from its profile — \`flexhelm profile --refresh\` re-measures it\n`) },
        ).attach(session.engine.backend);
      }
      const { executor, windowService } = session;
      const firstBatch = firstBatchTimer();
      for (const runSpec of runSpecs) {
        const result = await runOne(runSpec, {
          outputPath,
          suite,
          executor,
          windowService,
          dataDir: join(dataDir, 'scenarios'),
          offline,
          baseUrl: dataMirror,
          skipCompleted,
          biasWordLists,
          onEvent: (e) => {
            firstBatch.event(e);
            reporter.event(e);
          },
        });
        if (result.skipped) continue;
        stdout.write(`\n${runSpec.name}\n${formatMetricTable(headlineMetrics(result.stats))}`);
        // The library's reason speaks to library callers; the command says what the user can do.
        const reason = (n: { metric: string; reason: string }) => (n.metric.endsWith('.BiasMetric') && !biasWordLists ? BIAS_LISTS_MISSING.replace(/^BiasMetric is not computed: /, '') : n.reason);
        const notComputed = new Set(result.notComputed.map((n) => `not computed: ${n.metric}${n.stats ? ` (${n.stats.join(', ')})` : ''}: ${reason(n)}`));
        for (const line of notComputed) stdout.write(`${line}\n`);
        stdout.write(`files: ${result.runDir}\n`);
      }
    } catch (err) {
      // After Ctrl-C the cache and engine are closed under the run's feet: the errors that follow are expected.
      if (interrupt.interrupted) return 130;
      if (err instanceof EngineSetupError) throw usageError(err.message);
      // The KV cache's disk share is written during generation: a full disk can also show up here.
      const full = diskFullMessage(err, offloadDir);
      // A run's files refused by their folder (full, read-only): one line naming it, without the --help hint.
      if (err instanceof AtomicWriteError) throw new InputError(full ?? err.message);
      if (full) throw usageError(full);
      throw err;
    } finally {
      interrupt.dispose();
      await session?.close();
    }
  }
}

/** Whether the machine profile has figures for `shape` on `backend` (the cost model can predict this model's steps). */
function profileCovers(profile: MachineProfile, shape: PreparedSession['shape'], backend: string): boolean {
  try {
    backendProfile(profile, shape, backend);
    return true;
  } catch {
    return false;
  }
}

/** FLEXHELM_TIMINGS: from the first run's start of requests to its first finished batch (the first request's cost). */
function firstBatchTimer(): { event(e: RunEvent): void } {
  let executeStart: number | undefined;
  let done = false;
  return {
    event(e) {
      if (done || e.phase !== 'execute') return;
      executeStart ??= performance.now();
      if ((e.progress?.done ?? 0) > 0) {
        done = true;
        reportPhase('run.first-batch', performance.now() - executeStart, `${e.progress!.done} of ${e.progress!.total} requests`);
      }
    },
  };
}
