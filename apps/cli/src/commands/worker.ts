import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { DEFAULT_SHARD_LIMITS, isConnectionError, QueueUnavailableError, redactRedisUrl, ShardWorker, type ShardWorkerOptions } from '@flexhelm/distributed';
import { resolveDataDir } from '@flexhelm/downloads';
import { DEFAULT_MODEL } from '@flexhelm/runner';
import { defaultCachePath } from '@flexhelm/session';
import type { Command } from '../command.js';
import { integerOption } from '../option-values.js';
import { InputError } from '../usage-error.js';
import { queueConnection, queueModelId } from './queue-run.js';
import { openSessionFromOptions, runCommand } from './run.js';

const shared = ['model', 'path', 'data-dir', 'offline', 'offload-dir', 'gpu-batch-size', 'num-gpu-batches', 'percent', 'pin-weight', 'cpu-cache-compute', 'compress-weight', 'compress-cache', 'max-ram', 'compute-dtype', 'seed', 'pad-to-seq-len'] as const;

/** `ShardWorker.start`, with a Redis that cannot be reached at all as one line (exit status 2). */
async function startWorker(options: ShardWorkerOptions, url: string): Promise<ShardWorker> {
  try {
    return await ShardWorker.start(options);
  } catch (err) {
    if (err instanceof QueueUnavailableError || isConnectionError(err)) {
      throw new InputError(`${redactRedisUrl(url)}: ${(err as Error).message}; is Redis running there, and are the host, port and password right?`);
    }
    throw err;
  }
}

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
    'max-tokens': { type: 'string', valueName: 'N', description: `largest max_tokens a shard may ask; a shard asking more fails (default ${DEFAULT_SHARD_LIMITS.maxTokens}, the server’s)` },
    'stop-timeout': { type: 'string', valueName: 'S', description: 'on SIGINT/SIGTERM, seconds to give the shard in hand back and exit (default 10)' },
    'redis-timeout': { type: 'string', valueName: 'S', description: 'seconds Redis may stay unreachable before the worker exits (status 2; default 60)' },
  },
  details: [
    'The worker serves only runs of the same model: same weights (fingerprint) and same --seed as the coordinator.',
    'Each finished batch of requests is recorded at once in Redis (and in the local cache), so a killed worker loses',
    'only the batch in flight; its shard goes to another worker when the lock expires. SIGINT/SIGTERM cancel the',
    'batch in flight, give the shard back to the queue (another worker resumes it) and exit 0 within --stop-timeout;',
    'a second signal exits at once (status 130/143). A shard over the server’s limits (num_completions 16,',
    `top_k_per_token ${DEFAULT_SHARD_LIMITS.maxTopK}, max_tokens --max-tokens, prompt ${DEFAULT_SHARD_LIMITS.maxPromptBytes} bytes, ${DEFAULT_SHARD_LIMITS.maxRequests} requests) fails at once, without retries.`,
    '',
    'example:',
    '  flexhelm worker --queue redis://10.0.0.5:6379/0 --model facebook/opt-1.3b --gpu-batch-size 8 --percent 50 50 100 0 100 0',
    '  flexhelm worker --queue redis://10.0.0.5:6379/0 --model facebook/opt-1.3b --percent auto   (searched as by flexhelm run)',
  ].join('\n'),
  async run({ options, stderr, usageError }) {
    if (options.queue === undefined) throw usageError('give --queue redis://HOST:PORT[/DB], the Redis the coordinator uses');
    const connection = queueConnection(String(options.queue), usageError);
    const seconds = (name: string, fallback: number, min: number) => {
      const value = options[name] === undefined ? fallback : Number(options[name]);
      if (!Number.isFinite(value) || value < min || value > 86_400) throw usageError(`--${name} must be a number of seconds from ${min} to 86400, got '${String(options[name])}'`);
      return value;
    };
    const lockSeconds = seconds('lock-duration', 30, 1);
    const stopSeconds = seconds('stop-timeout', 10, 1);
    const redisSeconds = seconds('redis-timeout', 60, 1);
    const maxTokens = integerOption(options['max-tokens'], 'max-tokens', 1) ?? DEFAULT_SHARD_LIMITS.maxTokens;
    const model = (options.model as string | undefined) ?? DEFAULT_MODEL;
    const dataDir = resolveDataDir({ dataDir: options['data-dir'] as string | undefined });
    const seed = integerOption(options.seed, 'seed', 0) ?? 0;
    // `auto` parts as in `flexhelm run`; without --percent a worker keeps every weight resident.
    const session = await openSessionFromOptions(options, {
      model, dataDir, seed, percentDefault: 'resident',
      // Shards arrive later, so the plan is checked for FlexLLMGen's benchmark shape (prompt 512, 32 new tokens) and its
      // block of 64 sequences.
      workload: (description, padToSeqLen) => ({ promptLen: padToSeqLen ?? Math.min(512, description.maxPositions - 32), genLen: 32, numSequences: 64 }),
      cachePath: resolve((options['cache-path'] as string | undefined) ?? defaultCachePath(dataDir, model, 'worker-cache')),
      modelId: (folder) => queueModelId(model, folder, seed),
      log: (m) => stderr.write(`${m}\n`),
    }, usageError);
    try {
      const { executor, modelId } = session;
      const chunkSize = Math.max(8, session.policy.gpuBatchSize * session.policy.numGpuBatches);
      const name = (options.name as string | undefined) ?? `${hostname()}:${process.pid}`;
      const log = (line: string) => stderr.write(`${new Date().toISOString()} ${name} ${line}\n`);

      // Set from the worker's events: Redis gone too long.
      const state: { lost?: { error: string; seconds: number }; wake: () => void } = { wake: () => {} };
      const worker = await startWorker({
        connection,
        executor,
        name,
        chunkSize,
        lockDuration: lockSeconds * 1000,
        limits: { maxTokens },
        redisTimeoutMs: redisSeconds * 1000,
        onEvent: (e) => {
          if (e.type === 'ready') log(`serving ${modelId} on ${redactRedisUrl(String(options.queue))} (queue ${e.queue})`);
          else if (e.type === 'shard-start') log(`${e.runName} shard ${e.shardIndex + 1}/${e.shardCount}: ${e.requests} requests (attempt ${e.attempt})`);
          else if (e.type === 'chunk-done') log(`${e.runName} shard ${e.shardIndex + 1}: ${e.done}/${e.total} requests recorded`);
          else if (e.type === 'shard-done') {
            log(`${e.runName} shard ${e.shardIndex + 1}/${e.shardCount}: done in ${e.seconds.toFixed(1)} s (${e.result.computed} computed, ${e.result.skipped} already recorded)`);
          } else if (e.type === 'shard-failed') log(`${e.runName ?? '?'} shard ${(e.shardIndex ?? -1) + 1}: failed${e.unrecoverable ? ' (unrecoverable, not retried)' : ''}: ${e.error}`);
          else if (e.type === 'shard-returned') {
            log(`${e.runName} shard ${e.shardIndex + 1}: ${e.returned ? 'given back to the queue' : 'could not be given back (Redis unreachable): it is redelivered when its lock expires'} with ${e.done}/${e.total} requests recorded`);
          } else if (e.type === 'redis-down') log(`lost Redis (${e.error}); reconnecting, for up to ${redisSeconds} s`);
          else if (e.type === 'redis-up') log(`Redis is back after ${(e.downMs / 1000).toFixed(1)} s`);
          else if (e.type === 'redis-lost') {
            state.lost = e;
            state.wake();
          } else log(`queue error: ${e.error}`);
        },
      }, String(options.queue));
      let signals = 0;
      const onSignal = (signal: NodeJS.Signals) => {
        signals += 1;
        if (signals === 1) {
          log(`${signal}: giving the shard in hand back to the queue and exiting (within ${stopSeconds} s)`);
          state.wake();
          return;
        }
        // At once, but never under a batch in flight: the engine lets its current onnxruntime call end (tearing the
        // thread down inside one aborts the process), then the process exits.
        log(`${signal} again: exiting now`);
        worker.disconnect();
        const status = signal === 'SIGINT' ? 130 : 143;
        void session.close().finally(() => process.exit(status));
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      // Serve until a signal or until Redis stays away too long.
      await new Promise<void>((done) => {
        state.wake = done;
        if (state.lost) done();
      });
      // Past the bound, exit anyway (after the engine's call in flight, as above).
      const bound = setTimeout(() => {
        log(`did not stop within ${stopSeconds} s; exiting`);
        void session.close().finally(() => process.exit(state.lost ? 2 : 0));
      }, stopSeconds * 1000);
      bound.unref();
      const { lost } = state;
      if (lost) {
        worker.disconnect();
        await session.close();
        // A BullMQ client still reconnecting to the dead Redis must not keep the process alive (the engine is closed).
        setTimeout(() => process.exit(2), 5000).unref();
        throw new InputError(`lost Redis at ${redactRedisUrl(String(options.queue))}: ${lost.error}, not back within ${lost.seconds} s; the shard in hand returns to the queue when its lock expires. Start the worker again once Redis is back`);
      }
      // Cancels the rows in hand (the shard goes back with what it recorded), then stops the engine under them.
      await worker.stop(Math.max(500, (stopSeconds * 1000) / 3));
      await session.close();
      clearTimeout(bound);
    } finally {
      // Every way out (a failed start, a stop) closes both, so the process can exit.
      await session.close();
    }
  },
};
