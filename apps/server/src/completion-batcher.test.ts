import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, generationTokenIds } from '@flexhelm/engine';
import { CompletionBatcher } from './completion-batcher.js';
import { ClientAbortError } from './client-abort-error.js';
import { EngineGate } from './engine-gate.js';
import { loadTinyModel, type TinyModel } from './test-server.js';

let model: TinyModel;
let decode: (ids: number[]) => string;

beforeAll(async () => {
  model = await loadTinyModel();
  decode = (ids) => (ids.length ? model.tokenizer.decode(ids) : '');
}, 120_000);

afterAll(async () => {
  await model?.engine.close();
});

const batcher = () => new CompletionBatcher(model.engine, new EngineGate(), { maxBatchSize: 8, windowMs: 5, decode });
const ids = (text: string) => [generationTokenIds(model.engine.description).bos, ...model.tokenizer.encode(text).map(Number)];
const waitFor = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 1));
};

describe('CompletionBatcher', () => {
  it('gives n sampled rows the same completions as one generate call, however they are batched', async () => {
    const b = batcher();
    const request = { prompt: ids('Sampling rows one at a time'), maxNewTokens: 5, temperature: 1, n: 5, seed: 77, topLogprobs: 1 };
    const other = b.submit({ prompt: ids('company in the batch'), maxNewTokens: 3, n: 4 });
    const [mine] = await Promise.all([b.submit(request), other]);
    const [direct] = await generate(model.engine, [request], { decode });
    expect(mine.completions.map((c) => c.tokens.map((t) => t.id))).toEqual(direct!.completions.map((c) => c.tokens.map((t) => t.id)));
    mine.completions.forEach((c, i) => { expect(c.sumLogprob).toBeCloseTo(direct!.completions[i]!.sumLogprob, 4); });
  });

  it('serves a small request within two batches while a 1024-row request runs', async () => {
    const b = batcher();
    const stop = new AbortController();
    const big = b.submit({ prompt: ids('A very large request'), maxNewTokens: 2, n: 1024 }, { signal: stop.signal });
    await waitFor(() => b.stats.batches >= 2); // the large request holds the engine
    const sentAt = b.stats.batches;
    const small = await b.submit({ prompt: ids('small'), maxNewTokens: 2 });
    const servedAt = b.stats.batches;
    expect(small.completions[0]!.tokens).toHaveLength(2);
    // Before rows were scheduled, the small request waited for all 128 batches of the large one.
    expect(servedAt - sentAt).toBeLessThanOrEqual(2);
    expect(b.queuedRows).toBeGreaterThan(900);
    stop.abort(); // the rest of the large request is not needed here
    await expect(big).rejects.toBeInstanceOf(ClientAbortError);
    await b.idle();
  }, 120_000);

  it('drops the rows that have not started when the request is aborted', async () => {
    const b = batcher();
    const abort = new AbortController();
    const big = b.submit({ prompt: ids('A request whose client leaves'), maxNewTokens: 2, n: 1024 }, { signal: abort.signal });
    await waitFor(() => b.stats.batches >= 2);
    abort.abort();
    await expect(big).rejects.toBeInstanceOf(ClientAbortError);
    await b.idle();
    expect(b.stats.rows).toBeLessThan(64);
    expect(b.inFlight).toBe(0);
    // the next request runs at once
    const next = await b.submit({ prompt: ids('next'), maxNewTokens: 1 });
    expect(next.completions).toHaveLength(1);
    expect(b.stats.rows).toBeLessThan(65);
  }, 120_000);

  it('reports each row as it finishes, before the request resolves', async () => {
    const b = batcher();
    const seen: number[] = [];
    const done = await b.submit({ prompt: ids('rows one by one'), maxNewTokens: 1, n: 20 }, { onCompletion: (_, i) => seen.push(i) });
    expect(seen.sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(done.completions).toHaveLength(20);
    expect(b.stats.batches).toBe(3);
  });

  it('rejects at once when the signal has already fired, without running anything', async () => {
    const b = batcher();
    await expect(b.submit({ prompt: ids('x'), maxNewTokens: 1 }, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(ClientAbortError);
    expect(b.stats).toEqual({ batches: 0, requests: 0, rows: 0, tokens: 0 });
  });

  it('streams each row’s tokens and cancels an aborted request’s running rows at the next decode step', async () => {
    const b = batcher();
    const abort = new AbortController();
    const streamed = new Map<number, number[]>();
    const dropped = b.submit(
      { prompt: ids('A client that leaves mid-answer'), maxNewTokens: 64, n: 4, temperature: 1, seed: 8, stopAtEos: false },
      {
        signal: abort.signal,
        onTokens: (_, ci, tokens) => {
          streamed.set(ci, [...(streamed.get(ci) ?? []), ...tokens.map((t) => t.id)]);
          if (ci === 0 && streamed.get(0)!.length === 3) abort.abort();
        },
      },
    );
    // Another request in the same batch runs to its end.
    const kept: number[] = [];
    const other = b.submit({ prompt: ids('company'), maxNewTokens: 20, stopAtEos: false }, { onTokens: (_, __, tokens) => kept.push(...tokens.map((t) => t.id)) });
    await expect(dropped).rejects.toBeInstanceOf(ClientAbortError);
    const done = await other;
    await b.idle();
    expect(b.stats.batches).toBe(1);
    expect(kept).toEqual(done.completions[0]!.tokens.map((t) => t.id));
    expect(kept).toHaveLength(20);
    // Steps 1-3 of the four rows, then row 0's fourth token (row 0's own callback aborted in step 3; rows 1-3 were
    // cancelled in that step, their third token not passed on): 13 generated, not 4 × 64 = 256.
    expect(b.stats.tokens).toBe(13 + 20);
    expect([...streamed.values()].map((t) => t.length)).toEqual([3, 2, 2, 2]);
  }, 120_000);
});
