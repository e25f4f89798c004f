import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, generationTokenIds } from '@flexhelm/engine';
import type { RunningServer } from './start-server.js';
import { get, loadTinyModel, MODEL_NAME, post, serve, type TinyModel } from './test-server.js';

let model: TinyModel;
let server: RunningServer;
let url: string;

beforeAll(async () => {
  model = await loadTinyModel();
  server = await serve(model, { outputPath: `${model.root}/out`, batchWindowMs: 20, maxBatchSize: 8, maxTokens: 64, maxBodyBytes: 64 * 1024 });
  url = server.url;
}, 120_000);

afterAll(async () => {
  await server?.close();
  await model?.engine.close();
});

const decode = (ids: number[]) => (ids.length ? model.tokenizer.decode(ids) : '');
const promptIds = (text: string) => [generationTokenIds(model.engine.description).bos, ...model.tokenizer.encode(text).map(Number)];

describe('GET /v1/models', () => {
  it('lists the served model', async () => {
    const r = await get(`${url}/v1/models`);
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('list');
    expect(r.json.data).toEqual([expect.objectContaining({ id: MODEL_NAME, object: 'model', owned_by: 'flexhelm', max_context_length: 2048 })]);
  });
});

describe('POST /v1/completions', () => {
  it('answers a greedy text completion as the engine generates it', async () => {
    const prompt = 'The capital of France is';
    const r = await post(`${url}/v1/completions`, { model: MODEL_NAME, prompt, max_tokens: 6, temperature: 0 });
    expect(r.status).toBe(200);
    const [direct] = await generate(model.engine, [{ prompt: promptIds(prompt), maxNewTokens: 6, temperature: 0 }], { decode });
    const ids = direct!.completions[0]!.tokens.map((t) => t.id);
    expect(r.json.object).toBe('text_completion');
    expect(r.json.model).toBe(MODEL_NAME);
    expect(r.json.choices).toHaveLength(1);
    expect(r.json.choices[0]).toMatchObject({ index: 0, text: decode(ids), logprobs: null });
    expect(r.json.choices[0].finish_reason).toBe(direct!.completions[0]!.finishReason === 'length' ? 'length' : 'stop');
    expect(r.json.usage).toEqual({ prompt_tokens: promptIds(prompt).length, completion_tokens: ids.length, total_tokens: promptIds(prompt).length + ids.length });
  });

  it('echoes the prompt with each token’s logprob (first null), top logprobs and text offsets', async () => {
    const prompt = 'Hello world, this is a test';
    const r = await post(`${url}/v1/completions`, { prompt, max_tokens: 3, temperature: 0, echo: true, logprobs: 2 });
    expect(r.status).toBe(200);
    const choice = r.json.choices[0];
    const ids = promptIds(prompt);
    const [direct] = await generate(model.engine, [{ prompt: ids, maxNewTokens: 3, echoPrompt: true, topLogprobs: 2 }], { decode });
    const c = direct!.completions[0];
    const lp = choice.logprobs;
    expect(lp.tokens).toHaveLength(ids.length + c!.tokens.length);
    expect(lp.token_logprobs[0]).toBeNull();
    expect(lp.top_logprobs[0]).toBeNull();
    const expected = [...c!.promptTokens!, ...c!.tokens].map((t) => t.logprob);
    lp.token_logprobs.slice(1).forEach((v: number, i: number) => { expect(v).toBeCloseTo(expected[i + 1]!, 5); });
    for (const top of lp.top_logprobs.slice(1)) expect(Object.keys(top).length).toBeGreaterThanOrEqual(1);
    // offsets index the echoed text: prompt tokens first (the added </s> takes no room), then the completion
    expect(choice.text.startsWith(prompt)).toBe(true);
    expect(lp.text_offset[0]).toBe(0);
    for (let i = 1; i < lp.text_offset.length; i++) expect(lp.text_offset[i]).toBeGreaterThanOrEqual(lp.text_offset[i - 1]);
    expect(lp.text_offset[ids.length]).toBe(prompt.length);
    expect(choice.text.slice(lp.text_offset[ids.length])).toBe(lp.tokens.slice(ids.length).join(''));
  });

  it('cuts the text before a multi-token stop sequence and reports finish_reason "stop"', async () => {
    const prompt = 'Once upon a time';
    const free = await post(`${url}/v1/completions`, { prompt, max_tokens: 24, temperature: 0, logprobs: 0 });
    const tokens: string[] = free.json.choices[0].logprobs.tokens;
    const full: string = free.json.choices[0].text;
    // A stop made of two generated tokens from the middle of the free completion.
    const start = tokens.findIndex((t, i) => i >= 2 && i < tokens.length - 3 && (t + tokens[i + 1]).trim().length >= 2);
    expect(start).toBeGreaterThan(0);
    const stop = tokens[start]! + tokens[start + 1]!;
    const r = await post(`${url}/v1/completions`, { prompt, max_tokens: 24, temperature: 0, stop: ['@@never@@', stop], logprobs: 0 });
    const choice = r.json.choices[0];
    expect(choice.finish_reason).toBe('stop');
    expect(choice.text).toBe(full.slice(0, full.indexOf(stop)));
    expect(choice.text).not.toContain(stop);
    expect(choice.logprobs.tokens.join('').startsWith(choice.text)).toBe(true);
    // a single string stop works the same
    const single = await post(`${url}/v1/completions`, { prompt, max_tokens: 24, temperature: 0, stop });
    expect(single.json.choices[0].text).toBe(choice.text);
  });

  it('serves lm-evaluation-harness local-completions loglikelihood requests with the engine’s own logprobs', async () => {
    // The harness: token-id prompts (context + continuation), echo, logprobs=1, max_tokens=1, temperature 0, seed;
    // it sums token_logprobs[ctxlen:-1] per choice ordered by index and checks greediness against top_logprobs.
    const pairs: [string, string][] = [
      ['The sky is', ' blue'],
      ['Two plus two equals', ' four, of course'],
      ['Paris is in', ' France'],
    ];
    const contexts = pairs.map(([c]) => promptIds(c));
    const inputs = pairs.map(([, cont], i) => [...contexts[i]!, ...model.tokenizer.encode(cont).map(Number)]);
    const r = await post(`${url}/v1/completions`, { model: MODEL_NAME, prompt: inputs, echo: true, logprobs: 1, max_tokens: 1, temperature: 0, seed: 1234 });
    expect(r.status).toBe(200);
    const choices = [...r.json.choices].sort((a, b) => a.index - b.index);
    expect(choices.map((c) => c.index)).toEqual([0, 1, 2]);
    const direct = await generate(model.engine, inputs.map((ids) => ({ prompt: ids, maxNewTokens: 0, echoPrompt: true, topLogprobs: 1 })), { decode });
    choices.forEach((choice, i) => {
      const ctxlen = contexts[i]!.length;
      const lp = choice.logprobs;
      expect(lp.token_logprobs).toHaveLength(inputs[i]!.length + 1);
      const harnessSum = lp.token_logprobs.slice(ctxlen, -1).reduce((s: number, v: number) => s + v, 0);
      const harnessGreedy = lp.token_logprobs.slice(ctxlen, -1).every((v: number, k: number) => v === Math.max(...(Object.values(lp.top_logprobs[ctxlen + k]) as number[])));
      const scored = direct[i]!.completions[0]!.promptTokens!.slice(ctxlen);
      expect(harnessSum).toBeCloseTo(scored.reduce((s, t) => s + t.logprob!, 0), 5);
      expect(harnessGreedy).toBe(scored.every((t) => t.top[0]!.id === t.id));
      expect(lp.tokens.slice(0, inputs[i]!.length)).toEqual(inputs[i]!.map((id) => decode([id])));
    });
  });

  it('returns n sampled completions per prompt, reproducible with a seed', async () => {
    const body = { prompt: ['a b c', 'x y z'], max_tokens: 5, temperature: 1, n: 3, seed: 42 };
    const a = await post(`${url}/v1/completions`, body);
    const b = await post(`${url}/v1/completions`, body);
    expect(a.status).toBe(200);
    expect(a.json.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(b.json.choices.map((c: { text: string }) => c.text)).toEqual(a.json.choices.map((c: { text: string }) => c.text));
    expect(new Set(a.json.choices.slice(0, 3).map((c: { text: string }) => c.text)).size).toBeGreaterThan(1);
  });

  it('gathers concurrent clients into fewer engine batches, with the same answers as one at a time', async () => {
    const prompts = Array.from({ length: 8 }, (_, i) => `Client number ${i} says`);
    const serial = [];
    for (const prompt of prompts) serial.push((await post(`${url}/v1/completions`, { prompt, max_tokens: 4, temperature: 0 })).json.choices[0].text);
    const before = server.batcher.stats.batches;
    const parallel = await Promise.all(prompts.map((prompt) => post(`${url}/v1/completions`, { prompt, max_tokens: 4, temperature: 0 })));
    const batches = server.batcher.stats.batches - before;
    expect(parallel.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(batches).toBeLessThan(8);
    expect(batches).toBeGreaterThanOrEqual(1);
    expect(parallel.map((r) => r.json.choices[0].text)).toEqual(serial);
    const stats = await get(`${url}/v1/stats`);
    expect(stats.json.batches).toBe(server.batcher.stats.batches);
  });
});

describe('bad requests get OpenAI-style errors', () => {
  const cases: [string, unknown, number, string | null, RegExp][] = [
    ['no prompt', { max_tokens: 2 }, 400, 'prompt', /prompt/],
    ['a prompt of the wrong type', { prompt: { text: 'x' } }, 400, 'prompt', /string, a list of strings, a list of token ids/],
    ['negative token ids', { prompt: [1, -2] }, 400, 'prompt', /prompt/],
    ['a token id outside the vocabulary', { prompt: [2, 999999] }, 400, 'prompt', /outside the model's vocabulary 0\.\.50271/],
    ['max_tokens over the limit', { prompt: 'x', max_tokens: 65 }, 400, 'max_tokens', /max_tokens is 65, above this server's limit of 64/],
    ['temperature out of range', { prompt: 'x', temperature: 3 }, 400, 'temperature', /temperature/],
    ['stream_options without stream', { prompt: 'x', stream_options: { include_usage: true } }, 400, 'stream_options', /only allowed with stream=true/],
    ['an empty stop', { prompt: 'x', stop: [''] }, 400, 'stop', /must not be empty/],
    ['logprobs over 20', { prompt: 'x', logprobs: 21 }, 400, 'logprobs', /logprobs/],
  ];
  for (const [what, body, status, param, message] of cases) {
    it(`rejects ${what}`, async () => {
      const r = await post(`${url}/v1/completions`, body);
      expect(r.status).toBe(status);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect(r.json.error.message).toMatch(message);
    });
  }

  it('rejects a prompt longer than the model’s window with the numbers', async () => {
    const r = await post(`${url}/v1/completions`, { prompt: Array(2040).fill(100), max_tokens: 16 });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('context_length_exceeded');
    expect(r.json.error.message).toMatch(/maximum context length is 2048 tokens, however you requested 2056 tokens \(2040 in prompt 0; 16 for the completion\)/);
  });

  it('rejects another model name with 404', async () => {
    const r = await post(`${url}/v1/completions`, { model: 'gpt-3', prompt: 'x' });
    expect(r.status).toBe(404);
    expect(r.json.error).toMatchObject({ code: 'model_not_found', param: 'model' });
  });

  it('rejects bodies that are not JSON, or too large', async () => {
    const bad = await post(`${url}/v1/completions`, '{"prompt": ');
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/not valid JSON/);
    const big = await post(`${url}/v1/completions`, { prompt: 'x'.repeat(70 * 1024) });
    expect(big.status).toBe(413);
    expect(big.json.error.message).toMatch(/limit of 65536 bytes/);
  });

  it('answers unknown paths with 404 and wrong methods with 405', async () => {
    expect((await get(`${url}/v1/nothing`)).status).toBe(404);
    const r = await get(`${url}/v1/completions`);
    expect(r.status).toBe(405);
    expect(r.json.error.message).toMatch(/use POST/);
  });
});

describe('safety', () => {
  it('requires the bearer token on /v1 when an API key is set, but serves the viewer page without it', async () => {
    const guarded = await serve(model, { outputPath: `${model.root}/out-auth`, apiKey: 'sekrit-token-123' });
    try {
      const missing = await get(`${guarded.url}/v1/models`);
      expect(missing.status).toBe(401);
      expect(missing.json.error).toMatchObject({ code: 'invalid_api_key' });
      expect(missing.json.error.message).toMatch(/Authorization: Bearer/);
      const wrong = await post(`${guarded.url}/v1/completions`, { prompt: 'x' }, { authorization: 'Bearer nope' });
      expect(wrong.status).toBe(401);
      const ok = await post(`${guarded.url}/v1/completions`, { prompt: 'x', max_tokens: 1 }, { authorization: 'Bearer sekrit-token-123' });
      expect(ok.status).toBe(200);
      const page = await fetch(`${guarded.url}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<title>flexhelm results</title>');
    } finally {
      await guarded.close();
    }
  });

  it('binds 127.0.0.1 by default and refuses a non-loopback address without an API key', async () => {
    expect(server.host).toBe('127.0.0.1');
    await expect(serve(model, { outputPath: `${model.root}/out-open`, host: '0.0.0.0' })).rejects.toThrow(/refusing to bind 0\.0\.0\.0 without an API key/);
    await expect(serve(model, { outputPath: `${model.root}/out-short`, apiKey: 'short' })).rejects.toThrow(/at least 8 characters/);
  });
});
