// The completions service through a real server on loopback: fair row scheduling, cancel on disconnect, the
// response-size bound, streaming with the official openai client, byte-level token offsets.
import { connect, type Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PendingText } from './pending-text.js';
import type { RunningServer } from './start-server.js';
import { loadTinyModel, MODEL_NAME, post, serve, type TinyModel } from './test-server.js';

let model: TinyModel;
let server: RunningServer;
let url: string;
const logs: string[] = [];

beforeAll(async () => {
  model = await loadTinyModel();
  server = await serve(model, { outputPath: `${model.root}/out`, batchWindowMs: 5, maxBatchSize: 8, log: (m) => logs.push(m) });
  url = server.url;
}, 120_000);

afterAll(async () => {
  await server?.close();
  await model?.engine.close();
});

const waitFor = async (cond: () => boolean, what: string, ms = 60_000) => {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
};

/** A completions request on a raw socket, so the test can drop the connection as a client that goes away would. */
function rawCompletion(body: unknown): { socket: Socket; received: () => string } {
  const { hostname, port } = new URL(url);
  const payload = JSON.stringify(body);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (d) => (received += d.toString()));
  socket.on('error', () => {});
  socket.write(`POST /v1/completions HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`);
  return { socket, received: () => received };
}

/** 64 prompts × n 16 = 1024 rows: legal, and long enough to hold the engine for many batches. */
const bigRequest = { prompt: Array.from({ length: 64 }, (_, i) => `Large request prompt number ${i}`), n: 16, max_tokens: 8, temperature: 1, seed: 5 };

describe('scheduling rows, not requests', () => {
  it('answers a small request within about two engine batches while a 1024-row request runs', async () => {
    const stats = server.batcher.stats;
    const start = { batches: stats.batches, rows: stats.rows };
    const big = rawCompletion(bigRequest);
    // The engine batch duration under the same load: time of two batches of the large request.
    await waitFor(() => stats.batches >= start.batches + 1, 'the first batch');
    const t1 = performance.now();
    await waitFor(() => stats.batches >= start.batches + 3, 'two more batches');
    const batchMs = (performance.now() - t1) / 2;

    const sentAt = stats.batches;
    const t0 = performance.now();
    const small = await post(`${url}/v1/completions`, { prompt: 'small', max_tokens: 2, temperature: 0 });
    const latency = performance.now() - t0;
    expect(small.status).toBe(200);
    expect(big.received().length).toBe(0); // the large request is still running
    expect(stats.batches - sentAt).toBeLessThanOrEqual(2);
    // Before rows were scheduled the small request waited for all 128 batches (39 s on the machine).
    expect(latency).toBeLessThan(4 * batchMs + 250);

    // Dropping the connection drops the rest of the large request.
    big.socket.destroy();
    await waitFor(() => server.batcher.inFlight === 0, 'the large request to be dropped');
    expect(stats.rows - start.rows).toBeLessThan(200);
  }, 120_000);

  it('cancels the rows of a client that disconnects and logs it as one info line', async () => {
    const stats = server.batcher.stats;
    const start = { batches: stats.batches, rows: stats.rows, logs: logs.length };
    const dropped = rawCompletion(bigRequest);
    await waitFor(() => stats.batches >= start.batches + 2, 'the large request to start');
    dropped.socket.destroy();
    await waitFor(() => server.batcher.inFlight === 0, 'the dropped request to leave the batcher');
    // Before, all 1024 rows were still computed and the next request waited 104 s.
    expect(stats.rows - start.rows).toBeLessThan(100);

    const before = stats.batches;
    const next = await post(`${url}/v1/completions`, { prompt: 'next one', max_tokens: 2, temperature: 0 });
    expect(next.status).toBe(200);
    expect(stats.batches - before).toBe(1);

    await waitFor(() => logs.length > start.logs, 'the log line', 5_000);
    const lines = logs.slice(start.logs);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^client closed the connection: POST \/v1\/completions/);
    expect(lines[0]).not.toMatch(/internal error|\n\s+at /);
  }, 120_000);
});

describe('cancel while streaming', () => {
  it('drops the rows of a stream whose client goes away after the first chunks', async () => {
    const stats = server.batcher.stats;
    const start = { rows: stats.rows, logs: logs.length };
    const dropped = rawCompletion({ ...bigRequest, stream: true });
    await waitFor(() => dropped.received().includes('data: {'), 'the first chunk');
    expect(dropped.received()).toMatch(/^HTTP\/1\.1 200 OK\r\ncontent-type: text\/event-stream/);
    dropped.socket.destroy();
    await waitFor(() => server.batcher.inFlight === 0, 'the stream to leave the batcher');
    expect(stats.rows - start.rows).toBeLessThan(100);
    await waitFor(() => logs.length > start.logs, 'the log line', 5_000);
    expect(logs.slice(start.logs)).toEqual([expect.stringMatching(/^client closed the connection: POST \/v1\/completions/)]);
  }, 120_000);
});

describe('response size bound', () => {
  it('refuses 16 echoed prompts of 2047 ids with 20 top logprobs (a 19 MB answer) with the numbers and the flag', async () => {
    const prompt = Array.from({ length: 16 }, (_, p) => Array.from({ length: 2047 }, (_, i) => 100 + ((p * 31 + i) % 5000)));
    const rowsBefore = server.batcher.stats.rows;
    const r = await post(`${url}/v1/completions`, { prompt, echo: true, logprobs: 20, max_tokens: 0 });
    expect(r.status).toBe(400);
    expect(r.json.error.type).toBe('invalid_request_error');
    expect(r.json.error.param).toBe('logprobs');
    expect(r.json.error.message).toBe(
      "this request could return 655040 token entries: 16 rows (prompts × n) with 32752 tokens in all (echoed prompt tokens + max_tokens) × 20 top logprobs, above this server's limit of 262144 per request (--max-response-entries); send fewer prompts, a smaller n, max_tokens or logprobs",
    );
    expect(server.batcher.stats.rows).toBe(rowsBefore);
  }, 120_000);

  it('still serves a full echoed window with top logprobs (HELM-like use)', async () => {
    const prompt = Array.from({ length: 1500 }, (_, i) => 100 + (i % 3000));
    const r = await post(`${url}/v1/completions`, { prompt, echo: true, logprobs: 5, max_tokens: 1, temperature: 0 });
    expect(r.status).toBe(200);
    expect(r.json.choices[0].logprobs.tokens).toHaveLength(1501);
  }, 120_000);
});

describe('stream: true', () => {
  const client = () => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'not-checked-here', maxRetries: 0 });

  it('streams OpenAI text_completion chunks the official client reads, matching the non-streamed answer', async () => {
    const body = { model: MODEL_NAME, prompt: ['The sky is', 'Paris is in'], n: 2, max_tokens: 5, temperature: 0.8, seed: 9, logprobs: 1 };
    const stream = await client().completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const whole = await post(`${url}/v1/completions`, body);
    expect(whole.status).toBe(200);

    const usage = chunks.pop()!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual(whole.json.usage);
    for (const c of chunks) expect(c).toMatchObject({ object: 'text_completion', model: MODEL_NAME, id: chunks[0]!.id });
    for (const expected of whole.json.choices) {
      const mine = chunks.flatMap((c) => c.choices).filter((c) => c.index === expected.index);
      expect(mine.map((c) => c.text).join('')).toBe(expected.text);
      expect(mine.at(-1)!.finish_reason).toBe(expected.finish_reason);
      expect(mine.slice(0, -1).every((c) => c.finish_reason === null)).toBe(true);
      expect(mine.flatMap((c) => c.logprobs!.tokens!)).toEqual(expected.logprobs.tokens);
    }
    expect(new Set(chunks.flatMap((c) => c.choices.map((x) => x.index)))).toEqual(new Set([0, 1, 2, 3]));
  }, 60_000);

  it('sends server-sent events ending with data: [DONE], and errors as JSON before the stream starts', async () => {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Hello', max_tokens: 2, temperature: 0, stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    expect(events.at(-1)).toBe('data: [DONE]');
    // One chunk per token, then the last one with the finish reason (and whatever text was still held).
    expect(events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, '')).choices[0].finish_reason)).toEqual([null, null, 'length']);

    await expect(client().completions.create({ model: 'no/such-model', prompt: 'x', stream: true })).rejects.toMatchObject({ status: 404 });
  }, 60_000);
});

describe('byte-level offsets', () => {
  it('spells byte fragments as bytes:\\xNN and lines every text_offset up with the prompt’s characters', async () => {
    const prompt = 'Ünïcødé café — 日本語 😀 test';
    const r = await post(`${url}/v1/completions`, { prompt, echo: true, logprobs: 1, max_tokens: 0 });
    expect(r.status).toBe(200);
    const { tokens, text_offset: offsets } = r.json.choices[0].logprobs as { tokens: string[]; text_offset: number[] };
    const chars = Array.from(prompt); // OpenAI counts characters (code points), as Python's str does
    const bytesOf = (t: string) =>
      t.startsWith('bytes:') ? Buffer.from(t.slice(6).replaceAll('\\x', ''), 'hex') : Buffer.from(t, 'utf8');

    expect(tokens[0]).toBe('</s>'); // the added </s> takes no room
    expect(offsets[0]).toBe(0);
    expect(offsets[1]).toBe(0);
    const fragments = tokens.filter((t) => t.startsWith('bytes:'));
    expect(fragments.length).toBeGreaterThan(0);
    expect(fragments.every((t) => /^bytes:(\\x[0-9a-f]{2})+$/.test(t))).toBe(true);
    // Every token's bytes, in order, spell the prompt.
    expect(Buffer.concat(tokens.slice(1).map(bytesOf)).toString('utf8')).toBe(prompt);
    offsets.slice(1).forEach((o, i) => { expect(o).toBeGreaterThanOrEqual(offsets[i]!); });
    // Each offset is the characters of the bytes before the token, an unfinished character not counted yet.
    for (let i = 1; i < tokens.length; i++) {
      const before = Buffer.concat(tokens.slice(1, i).map(bytesOf));
      expect(offsets[i]).toBe(Array.from(new TextDecoder().decode(before, { stream: true })).length);
      const end = i + 1 < tokens.length ? offsets[i + 1] : chars.length;
      if (!tokens[i]!.startsWith('bytes:')) expect(chars.slice(offsets[i], end).join('')).toBe(tokens[i]);
    }
    // The last token ends the prompt.
    expect(offsets.at(-1)! + Array.from(bytesOf(tokens.at(-1)!).toString('utf8')).length).toBe(chars.length);
    // A generated fragment is spelled the same way in top_logprobs' keys.
    for (const top of r.json.choices[0].logprobs.top_logprobs.slice(1)) for (const k of Object.keys(top)) expect(k).not.toContain('\uFFFD');
  });
});

describe('token-by-token streaming', () => {
  const client = () => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'not-checked-here', maxRetries: 0 });
  type Choice = { index: number; text: string; finish_reason: string | null; logprobs?: { tokens?: string[]; token_logprobs?: (number | null)[]; top_logprobs?: unknown[]; text_offset?: number[] } | null };

  /** A streamed request's choices through the official client, and the engine's token count at the first chunk. */
  async function streamed(body: Record<string, unknown>): Promise<{ chunks: Choice[]; tokensAtFirst: number }> {
    const before = server.batcher.stats.tokens;
    let tokensAtFirst = -1;
    const chunks: Choice[] = [];
    const stream = await client().completions.create({ model: MODEL_NAME, prompt: 'x', ...body, stream: true } as OpenAI.CompletionCreateParamsStreaming);
    for await (const chunk of stream) {
      if (tokensAtFirst < 0) tokensAtFirst = server.batcher.stats.tokens - before;
      chunks.push(...(chunk.choices as Choice[]));
    }
    return { chunks, tokensAtFirst };
  }
  const joined = (chunks: Choice[], index: number) => chunks.filter((c) => c.index === index).map((c) => c.text).join('');

  it('sends the first chunk before the last token is generated, one chunk per token, adding up to the whole answer', async () => {
    const body = { prompt: 'A long story begins', max_tokens: 64, temperature: 0 };
    const { chunks, tokensAtFirst } = await streamed(body);
    const whole = await post(`${url}/v1/completions`, body);
    expect(whole.json.usage.completion_tokens).toBe(64);
    // Before, the only chunk came once all 64 tokens existed.
    expect(tokensAtFirst).toBeGreaterThanOrEqual(1);
    expect(tokensAtFirst).toBeLessThan(64);
    expect(joined(chunks, 0)).toBe(whole.json.choices[0].text);
    expect(chunks.length).toBeGreaterThan(32);
    expect(chunks.slice(0, -1).every((c) => c.finish_reason === null)).toBe(true);
    expect(chunks.at(-1)!.finish_reason).toBe('length');
  }, 60_000);

  it('never sends text of a stop sequence: equal to the non-streamed answer for 40 random stop sets', async () => {
    const base = { prompt: ['Stop sequences are', 'Another prompt here'], max_tokens: 24, temperature: 1, seed: 21, n: 2 };
    const free = await post(`${url}/v1/completions`, base);
    const texts: string[] = free.json.choices.map((c: Choice) => c.text);
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let stopped = 0;
    for (let trial = 0; trial < 40; trial++) {
      // Pieces of the free answers (so they hit, across token boundaries), and some that never occur.
      const stop = Array.from({ length: 1 + Math.floor(next() * 4) }, () => {
        if (next() < 0.25) return `@@${trial}`;
        const t = texts[Math.floor(next() * texts.length)]!;
        const at = Math.floor(next() * Math.max(1, t.length - 1));
        return t.slice(at, at + 1 + Math.floor(next() * 6)) || 'z';
      });
      const body = { ...base, stop, logprobs: 1 };
      const whole = await post(`${url}/v1/completions`, body);
      expect(whole.status).toBe(200);
      const { chunks } = await streamed(body);
      for (const expected of whole.json.choices as Choice[]) {
        const mine = chunks.filter((c) => c.index === expected.index);
        expect(mine.map((c) => c.text).join(''), JSON.stringify(stop)).toBe(expected.text);
        expect(mine.at(-1)!.finish_reason).toBe(expected.finish_reason);
        expect(mine.flatMap((c) => c.logprobs!.tokens!)).toEqual(expected.logprobs!.tokens);
        expect(mine.flatMap((c) => c.logprobs!.text_offset!)).toEqual(expected.logprobs!.text_offset);
        expect(mine.flatMap((c) => c.logprobs!.token_logprobs!)).toEqual(expected.logprobs!.token_logprobs);
        expect(mine.flatMap((c) => c.logprobs!.top_logprobs!)).toEqual(expected.logprobs!.top_logprobs);
        // No chunk but the last holds text of a stop (a stop's text is never sent and taken back).
        for (const c of mine) for (const s of stop) expect(c.text).not.toContain(s);
        if (expected.finish_reason === 'stop') stopped++;
      }
    }
    expect(stopped).toBeGreaterThan(20);
  }, 120_000);

  it('adds up to the whole answer for sampled text full of byte-fragment tokens, U+FFFD only where the answer has it', async () => {
    const body = { prompt: 'Ünïcødé 日本語 😀', n: 16, max_tokens: 48, temperature: 2, seed: 4, logprobs: 0 };
    const whole = await post(`${url}/v1/completions`, body);
    const { chunks } = await streamed(body);
    let fragments = 0;
    for (const expected of whole.json.choices as Choice[]) {
      const mine = chunks.filter((c) => c.index === expected.index);
      expect(mine.map((c) => c.text).join('')).toBe(expected.text);
      fragments += expected.logprobs!.tokens!.filter((t) => t.startsWith('bytes:')).length;
      // A replacement character only where the whole answer has one (bytes that never became a character).
      if (!expected.text.includes('\uFFFD')) for (const c of mine) expect(c.text).not.toContain('\uFFFD');
    }
    expect(fragments).toBeGreaterThan(0);
  }, 60_000);

  it('holds the byte fragments of a character split over tokens by the real tokenizer until it is whole', () => {
    const text = 'Ünïcødé café — 日本語 😀 test';
    const ids = model.tokenizer.encode(text).map(Number);
    const decode = (x: number[]) => model.tokenizer.decode(x);
    // The tokenizer really splits characters here: some prefix of the tokens decodes to a trailing U+FFFD.
    expect(ids.some((_, i) => decode(ids.slice(0, i + 1)).endsWith('\uFFFD'))).toBe(true);
    const pending = new PendingText(decode, []);
    const pieces = ids.map((id) => pending.push([id]));
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) expect(piece).not.toContain('\uFFFD');
  });

  it('echoes the prompt first, with its logprobs, then the generated tokens', async () => {
    const body = { prompt: 'Echo me please', max_tokens: 6, temperature: 0, echo: true, logprobs: 2 };
    const whole = await post(`${url}/v1/completions`, body);
    const { chunks } = await streamed(body);
    expect(chunks[0]!.text).toBe('Echo me please');
    expect(chunks[0]!.logprobs!.token_logprobs![0]).toBeNull();
    expect(chunks[0]!.logprobs!.tokens).toEqual(whole.json.choices[0].logprobs.tokens.slice(0, chunks[0]!.logprobs!.tokens!.length));
    expect(joined(chunks, 0)).toBe(whole.json.choices[0].text);
    expect(chunks.flatMap((c) => c.logprobs!.text_offset!)).toEqual(whole.json.choices[0].logprobs.text_offset);
    expect(chunks.length).toBeGreaterThan(3);
  }, 60_000);

  it('keeps streaming the choices that still run after others finished (12 rows in batches of 8)', async () => {
    const body = { prompt: 'Many choices', n: 12, max_tokens: 16, temperature: 1, seed: 3 };
    const whole = await post(`${url}/v1/completions`, body);
    const { chunks } = await streamed(body);
    const firstFinish = chunks.findIndex((c) => c.finish_reason !== null);
    // The last four rows run in the second batch: their tokens stream after the first eight choices finished.
    const late = chunks.slice(firstFinish).filter((c) => c.index >= 8 && c.finish_reason === null && c.text !== '');
    expect(late.length).toBeGreaterThan(8);
    for (const expected of whole.json.choices as Choice[]) expect(joined(chunks, expected.index)).toBe(expected.text);
  }, 60_000);

  it('cancels the rows of a stream whose client goes away within a step or two', async () => {
    const stats = server.batcher.stats;
    const dropped = rawCompletion({ prompt: 'Leaving soon', n: 4, max_tokens: 200, temperature: 1, seed: 1, stream: true });
    await waitFor(() => (dropped.received().match(/data: \{/g)?.length ?? 0) >= 8, 'eight chunks');
    const at = stats.tokens;
    dropped.socket.destroy();
    await waitFor(() => server.batcher.inFlight === 0, 'the stream to leave the batcher');
    await server.batcher.idle();
    // Four rows: at most two more decode steps (before, every row ran to its 200 tokens).
    expect(stats.tokens - at).toBeLessThanOrEqual(2 * 4);
  }, 60_000);
});
