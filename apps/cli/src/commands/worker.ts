import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { redactRedisUrl, ShardWorker } from '@flexhelm/distributed';
import { resolveDataDir } from '@flexhelm/downloads';
import { DEFAULT_MODEL } from '@flexhelm/runner';
import { defaultCachePath } from '@flexhelm/session';
import type { Command } from '../command.js';
import { integerOption } from '../option-values.js';
import { queueConnection, queueModelId } from './queue-run.js';
import { openSessionFromOptions, runCommand } from './run.js';

const shared = ['model', 'path', 'data-dir', 'offline', 'offload-dir', 'gpu-batch-size', 'num-gpu-batches', 'percent', 'pin-weight', 'cpu-cache-compute', 'compress-weight', 'compress-cache', 'max-ram', 'compute-dtype', 'seed', 'pad-to-seq-len'] as const;

/** `flexhelm worker`: loads the model once and serves shards of `flexhelm run --queue` runs until stopped. */
export const workerCommand: Command = {
  name: 'worker',
  summary: 'Serve shards of distributed runs (`flexhelm run --queue`) from a Redis queue with a local OPT model',
  options: {
    queue: { type: 'string', valueName: 'URL', description: 'the Redis queue: redis://[USER:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS; password also from $REDIS_PASSWORD)' },
    ...Object.fromEntries(shared.map((k) => [k, runCommand.options[k]])),
    'cache-path': { type: 'string', valueName: 'FILE', description: 'this worker’s local request cache (default <data-dir>/worker-cache/<model>.sqlite)' },
    name: { type: 'string', valueName: 'NAME', description: 'worker name shown by `flexhelm queue status` (default <hostname>:<pid>)' },
    'lock-duration': { type: 'string', valueName: 'S', description: 'seconds a shard stays locked without renewal; a killed worker’s shard is redelivered after this (default 30)' },
  },
  details: [
    'The worker serves only runs of the same model: same weights (fingerprint) and same --seed as the coordinator.',
    'Each finished batch of requests is recorded at once in Redis (and in the local cache), so a killed worker loses',
    'only the batch in flight; its shard goes to another worker when the lock expires. SIGINT/SIGTERM finish the',
    'current shard and exit; a second signal exits at once (the shard is then redelivered).',
    '',
    'example:',
    '  flexhelm worker --queue redis://10.0.0.5:6379/0 --model facebook/opt-1.3b --gpu-batch-size 8 --percent 50 50 100 0 100 0',
    '  flexhelm worker --queue redis://10.0.0.5:6379/0 --model facebook/opt-1.3b --percent auto   (searched as by flexhelm run)',
  ].join('\n'),
  async run({ options, stderr, usageError }) {
    if (options.queue === undefined) throw usageError('give --queue redis://HOST:PORT[/DB], the Redis the coordinator uses');
    const connection = queueConnection(String(options.queue), usageError);
    const lockSeconds = options['lock-duration'] === undefined ? 30 : Number(options['lock-duration']);
    if (!Number.isFinite(lockSeconds) || lockSeconds < 1) throw usageError(`--lock-duration must be a number of seconds ≥ 1, got '${String(options['lock-duration'])}'`);
    const model = (options.model as string | undefined) ?? DEFAULT_MODEL;
    const dataDir = resolveDataDir({ dataDir: options['data-dir'] as string | undefined });
    const seed = integerOption(options.seed, 'seed', 0) ?? 0;
    // `auto` parts as in `flexhelm run`; without --percent a worker keeps every weight resident.
    const session = await openSessionFromOptions(options, {
      model, dataDir, seed, percentDefault: 'resident',
      // Shards arrive later, so the plan is checked for FlexLLMGen's benchmark shape (prompt 512, 32 new tokens) and its
      // block of 64 sequences.
      workload: (config, padToSeqLen) => ({ promptLen: padToSeqLen ?? Math.min(512, config.maxPositionEmbeddings - 32), genLen: 32, numSequences: 64 }),
      cachePath: resolve((options['cache-path'] as string | undefined) ?? defaultCachePath(dataDir, model, 'worker-cache')),
      modelId: (folder) => queueModelId(model, folder, seed),
      log: (m) => stderr.write(`${m}\n`),
    }, usageError);
    try {
      const { executor, modelId } = session;
      const chunkSize = Math.max(8, session.policy.gpuBatchSize * session.policy.numGpuBatches);
      const name = (options.name as string | undefined) ?? `${hostname()}:${process.pid}`;
      const log = (line: string) => stderr.write(`${new Date().toISOString()} ${name} ${line}\n`);

      const worker = await ShardWorker.start({
        connection,
        executor,
        name,
        chunkSize,
        lockDuration: lockSeconds * 1000,
        onEvent: (e) => {
          if (e.type === 'ready') log(`serving ${modelId} on ${redactRedisUrl(String(options.queue))} (queue ${e.queue})`);
          else if (e.type === 'shard-start') log(`${e.runName} shard ${e.shardIndex + 1}/${e.shardCount}: ${e.requests} requests (attempt ${e.attempt})`);
          else if (e.type === 'chunk-done') log(`${e.runName} shard ${e.shardIndex + 1}: ${e.done}/${e.total} requests recorded`);
          else if (e.type === 'shard-done') {
            log(`${e.runName} shard ${e.shardIndex + 1}/${e.shardCount}: done in ${e.seconds.toFixed(1)} s (${e.result.computed} computed, ${e.result.skipped} already recorded)`);
          } else if (e.type === 'shard-failed') log(`${e.runName ?? '?'} shard ${(e.shardIndex ?? -1) + 1}: failed: ${e.error}`);
          else log(`queue error: ${e.error}`);
        },
      });
      await new Promise<void>((done) => {
        let stopping = false;
        const stop = (signal: string) => {
          if (stopping) {
            log(`${signal} again: exiting now; the shard in hand will be redelivered`);
            process.exit(130);
          }
          stopping = true;
          log(`${signal}: finishing the shard in hand, then exiting`);
          void worker.close().then(done, done);
        };
        process.on('SIGINT', () => stop('SIGINT'));
        process.on('SIGTERM', () => stop('SIGTERM'));
      });
    } finally {
      // Every way out (a failed start, a stop) closes both, so the process can exit.
      await session.close();
    }
  },
};
