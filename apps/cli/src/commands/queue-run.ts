import { join } from 'node:path';
import type { RunSpec } from '@flexhelm/core';
import { alignedShardSize, DEFAULT_SHARD_LIMITS, parseRedisUrl, QueueUnavailableError, redactRedisUrl, RedisUrlError, runOnQueue, ShardFailedError, type RedisConnection } from '@flexhelm/distributed';
import { finishRun, formatMetricTable, headlineMetrics, modelFingerprint, prepareRun, ProgressReporter, type BiasWordLists } from '@flexhelm/runner';
import { localOptWindowService, loadTokenizerFolder } from '@flexhelm/tokenizer';
import { InputError, type UsageError } from '../usage-error.js';

/** The queue's model identity: the weights' fingerprint, plus the sampling seed when it is not the default. */
export function queueModelId(model: string, folder: string, seed: number): string {
  const id = `${model}@${modelFingerprint(folder)}`;
  return seed === 0 ? id : `${id}#seed=${seed}`;
}

/** `--queue URL` as connection settings; a malformed URL is a usage error saying what to write. */
export function queueConnection(url: string, usageError: (message: string) => UsageError): RedisConnection {
  try {
    return parseRedisUrl(url);
  } catch (err) {
    if (err instanceof RedisUrlError) throw usageError(err.message);
    throw err;
  }
}

/** `FLEXHELM_REDIS_TIMEOUT` (seconds Redis may stay unreachable before a run stops; default 60) in ms. */
function redisTimeoutMs(env: NodeJS.ProcessEnv, usageError: (message: string) => UsageError): number {
  const text = env.FLEXHELM_REDIS_TIMEOUT;
  if (text === undefined || text === '') return 60_000;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 1 || seconds > 86_400) throw usageError(`FLEXHELM_REDIS_TIMEOUT must be a number of seconds from 1 to 86400, got '${text}'`);
  return seconds * 1000;
}

/** This process's command line, to be run again (shell-quoted; a password in a Redis URL replaced by `***`). */
function commandLine(): string {
  const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
  return ['flexhelm', ...process.argv.slice(2).map((a) => quote(redactRedisUrl(a)))].join(' ');
}

/**
 * The shard size for `requested` (default 4 engine batches): whole batches, at most the workers' limit of requests per
 * shard (a larger default is cut down; a larger `--shard-size` is refused).
 */
function queueShardSize(requested: number | undefined, chunk: number, usageError: (message: string) => UsageError): number {
  const limit = DEFAULT_SHARD_LIMITS.maxRequests;
  if (chunk > limit) throw usageError(`an engine batch of ${chunk} requests is above the workers' limit of ${limit} requests per shard: use a smaller --gpu-batch-size × --num-gpu-batches`);
  const size = alignedShardSize(requested ?? Math.min(4 * chunk, Math.floor(limit / chunk) * chunk), chunk);
  if (size > limit) throw usageError(`--shard-size ${requested} makes shards of ${size} requests (whole batches of ${chunk}), above the workers' limit of ${limit}: give at most ${Math.floor(limit / chunk) * chunk}`);
  return size;
}

export interface QueueRunParams {
  queueUrl: string;
  /** Requests per shard as asked (default 4 engine batches); rounded up to whole batches. */
  shardSize?: number;
  runSpecs: RunSpec[];
  model: string;
  folder: string;
  maxPositionEmbeddings: number;
  /** The engine's effective batch (gpu_batch_size × num_gpu_batches) the workers use. */
  batch: number;
  seed: number;
  outputPath: string;
  suite: string;
  dataDir: string;
  offline: boolean;
  dataMirror?: string;
  skipCompleted: boolean;
  /** HELM's bias word lists, as a single-machine run has them (BiasMetric is not computed without). */
  biasWordLists?: BiasWordLists;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  usageError: (message: string) => UsageError;
}

/**
 * `flexhelm run --queue`: the coordinator. Everything up to the requests and everything after them happens here,
 * exactly as in a single-machine run; the requests go to the workers as shards, and their results come back from
 * the shared result store. No model is loaded here, only its tokenizer.
 */
export async function runViaQueue(p: QueueRunParams): Promise<void> {
  const connection = queueConnection(p.queueUrl, p.usageError);
  // The same chunking the workers' request cache uses: shards then hold whole engine batches.
  const chunk = Math.max(8, p.batch);
  const shardSize = queueShardSize(p.shardSize, chunk, p.usageError);
  const timeoutMs = redisTimeoutMs(process.env, p.usageError);
  const modelId = queueModelId(p.model, p.folder, p.seed);
  const tokenizer = loadTokenizerFolder(p.folder, p.model);
  const windowService = localOptWindowService(tokenizer, p.maxPositionEmbeddings);
  const reporter = new ProgressReporter(p.stderr as NodeJS.WritableStream & { isTTY?: boolean });
  p.stderr.write(`coordinator: model ${modelId} on ${redactRedisUrl(p.queueUrl)}; shards of ${shardSize} requests\n`);
  for (const runSpec of p.runSpecs) {
    const options = {
      outputPath: p.outputPath,
      suite: p.suite,
      windowService,
      dataDir: join(p.dataDir, 'scenarios'),
      offline: p.offline,
      baseUrl: p.dataMirror,
      skipCompleted: p.skipCompleted,
      biasWordLists: p.biasWordLists,
      onEvent: (e: Parameters<ProgressReporter['event']>[0]) => reporter.event(e),
    };
    let prepared: Awaited<ReturnType<typeof prepareRun>>;
    try {
      prepared = await prepareRun(runSpec, options);
    } catch (err) {
      if ((err as Error).name === 'DownloadError') throw p.usageError((err as Error).message);
      throw err;
    }
    if (!prepared) continue;
    const requests = prepared.adapted.request_states.map((rs) => rs.request);
    let outcome: Awaited<ReturnType<typeof runOnQueue>>;
    try {
      outcome = await runOnQueue(requests, {
        connection,
        modelId,
        runName: runSpec.name,
        shardSize,
        redisTimeoutMs: timeoutMs,
        onProgress: (progress) => reporter.event({ runName: runSpec.name, phase: 'execute', progress }),
      });
    } catch (err) {
      if (err instanceof ShardFailedError) throw p.usageError(err.message);
      if (err instanceof RangeError) throw p.usageError(err.message);
      if (err instanceof QueueUnavailableError) {
        // The progress line of a terminal stays as it was; the error starts a line of its own.
        if ((p.stderr as { isTTY?: boolean }).isTTY) p.stderr.write('\n');
        // A BullMQ client still reconnecting to the dead Redis must not keep the process alive (no engine runs here).
        setTimeout(() => process.exit(2), 5000).unref();
        throw new InputError(
          `${runSpec.name}: Redis at ${redactRedisUrl(p.queueUrl)}: ${err.message}. The results recorded so far are kept (in Redis, and in the workers' caches); ` +
            `once Redis is back, run the same command again to resume: ${commandLine()}`,
        );
      }
      throw err;
    }
    p.stderr.write(
      `${runSpec.name}: ${outcome.shards} shards (${outcome.shardsAlreadyDone} already done, ${outcome.alreadyRecorded} requests already recorded); ` +
        `coordinator queue time ${((outcome.enqueueMs + outcome.fetchMs) / 1000).toFixed(2)} s\n`,
    );
    const result = await finishRun(prepared, outcome.results, options);
    p.stdout.write(`\n${runSpec.name}\n${formatMetricTable(headlineMetrics(result.stats))}`);
    const notComputed = new Set(result.notComputed.map((n) => `not computed: ${n.metric}${n.stats ? ` (${n.stats.join(', ')})` : ''}: ${n.reason}`));
    for (const line of notComputed) p.stdout.write(`${line}\n`);
    p.stdout.write(`files: ${result.runDir}\n`);
  }
}
