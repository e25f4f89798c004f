import { formatQueueStatus, isConnectionError, QueueUnavailableError, queueStatus, redactRedisUrl, retryFailedShards } from '@flexhelm/distributed';
import { InputError } from '../usage-error.js';
import { queueConnection } from './queue-run.js';
import type { Command } from '../command.js';

/** `flexhelm queue status|retry`: what the distributed queue is doing, and a second chance for failed shards. */
export const queueCommand: Command = {
  name: 'queue',
  summary: 'Show distributed-run shards per run and worker (status) or put failed shards back in the queue (retry)',
  positionals: 'status|retry',
  options: {
    queue: { type: 'string', valueName: 'URL', description: 'the Redis queue: redis://[USER:PASSWORD@]HOST:PORT[/DB]' },
    run: { type: 'string', valueName: 'NAME', description: 'retry: only this run’s failed shards' },
    json: { type: 'boolean', description: 'status: print JSON instead of a table' },
  },
  details: ['examples:', '  flexhelm queue status --queue redis://127.0.0.1:6379', '  flexhelm queue retry --queue redis://127.0.0.1:6379 --run "mmlu:subject=anatomy,model=facebook_opt-1.3b"'].join('\n'),
  async run({ options, positionals, stdout, usageError }) {
    const action = positionals[0];
    if (positionals.length !== 1 || (action !== 'status' && action !== 'retry')) throw usageError('say what to do: `flexhelm queue status --queue URL` or `flexhelm queue retry --queue URL`');
    if (options.queue === undefined) throw usageError('give --queue redis://HOST:PORT[/DB]');
    const connection = queueConnection(String(options.queue), usageError);
    try {
      if (action === 'retry') {
        const n = await retryFailedShards(connection, options.run as string | undefined);
        stdout.write(`${n} failed shard(s) put back in the queue${options.run ? ` for ${String(options.run)}` : ''}\n`);
        return;
      }
      const status = await queueStatus(connection);
      if (options.json) {
        const plain = { ...status, queues: status.queues.map((q) => ({ ...q, runs: Object.fromEntries(q.runs), workers: Object.fromEntries(q.workers) })) };
        stdout.write(`${JSON.stringify(plain, null, 2)}\n`);
      } else stdout.write(formatQueueStatus(status));
    } catch (err) {
      if (err instanceof QueueUnavailableError || isConnectionError(err)) throw new InputError(`${redactRedisUrl(String(options.queue))}: ${(err as Error).message}`);
      throw err;
    }
  },
};
