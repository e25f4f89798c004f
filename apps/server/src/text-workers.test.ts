// The text worker pool with a real chat template in real worker threads: the render limit times the render, not the
// wait in the queue; the queue is bounded; errors name the model, never a folder.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BACKGROUND_NICE } from './background-thread.js';
import type { ApiError } from './api-error.js';
import { TextWorkers } from './text-workers.js';

// Loops as many times as the message says: a render whose cost the test chooses.
const template = {
  source: "{% if messages[0].content == 'boom' %}{{ raise_exception('no boom') }}{% endif %}{% for i in range(messages[0].content | int) %}{% endfor %}{{ 'done' }}",
  file: '/srv/secret/models/m/tokenizer_config.json' };

const workers = (options: Partial<ConstructorParameters<typeof TextWorkers>[0]> = {}) => new TextWorkers({ template, tokenizerName: 'm', modelLabel: 'org/model', threads: 1, ...options });
const render = (w: TextWorkers, loops: number | string) => w.render([{ role: 'user', content: String(loops) }]);

/** Nice value of each thread of this process (field 19 of /proc/self/task/<tid>/stat, counted after the command name). */
function threadNices(): Map<number, number> {
  const nices = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      nices.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // a thread that ended while listed
    }
  }
  return nices;
}

describe('TextWorkers', () => {
  it.runIf(process.platform === 'linux')('a background pool runs below the event loop’s priority; a rendering pool and the main thread do not', async () => {
    const before = threadNices().get(process.pid)!;
    const niced = Math.max(before, BACKGROUND_NICE);
    const countNiced = () => [...threadNices().values()].filter((n) => n === niced).length;
    const already = countNiced();
    // The rendering pool (chat templates: a wall-clock limit a starved thread would run out) keeps normal priority.
    const renderPool = workers({ threads: 2 });
    const bulk = workers({ threads: 2, background: true });
    try {
      await Promise.all([render(renderPool, 1), render(renderPool, 1)]); // both threads started and working
      expect(countNiced()).toBe(already);
      await Promise.all([render(bulk, 1), render(bulk, 1)]);
      expect(countNiced()).toBe(already + 2);
      expect(threadNices().get(process.pid), 'the main thread').toBe(before);
    } finally {
      await Promise.all([renderPool.close(), bulk.close()]);
    }
  });

  it('times each rendering from its start: a queue of renderings never runs out the clock of the ones behind', async () => {
    // One rendering's cost on this machine, then a limit of 4 renderings and a queue of 12 on one thread: timed from
    // the queue (as before) the 5th and later ran out; timed from their start none does.
    const probe = workers({ renderTimeoutMs: 60_000 });
    await render(probe, 1); // the worker's start-up is not part of a rendering
    const t0 = performance.now();
    await render(probe, 200_000);
    const one = performance.now() - t0;
    await probe.close();
    const w = workers({ renderTimeoutMs: Math.max(1_000, 4 * one) });
    try {
      const results = await Promise.allSettled(Array.from({ length: 12 }, () => render(w, 200_000)));
      expect(results.map((r) => r.status)).toEqual(Array(12).fill('fulfilled'));
    } finally {
      await w.close();
    }
  }, 120_000);

  it('refuses renderings beyond its queue bound with a 503 at once', async () => {
    const w = workers({ maxQueue: 2 });
    try {
      const results = await Promise.allSettled(Array.from({ length: 6 }, () => render(w, 1000)));
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as ApiError);
      // One running, two waiting: the other three are refused.
      expect(refused).toHaveLength(3);
      for (const e of refused) expect(e.toJSON().error).toMatchObject({ type: 'server_error', code: 'server_busy' });
      expect(refused[0]!.status).toBe(503);
    } finally {
      await w.close();
    }
  }, 60_000);

  it('names the model in template errors and timeouts, never the template’s folder', async () => {
    const w = workers({ renderTimeoutMs: 200 });
    try {
      const broken = await render(w, 'boom').catch((e: ApiError) => e);
      const slow = await render(w, 1e9).catch((e: ApiError) => e);
      for (const e of [broken, slow] as ApiError[]) {
        expect(e.status).toBe(400);
        expect(e.message).toContain('chat template of org/model');
        expect(e.message).not.toContain('/srv/secret');
      }
      expect((slow as ApiError).message).toMatch(/took longer than 200 ms/);
      expect(await render(w, 3)).toBe('done'); // a new worker took over
    } finally {
      await w.close();
    }
  }, 60_000);
});
