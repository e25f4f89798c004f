// POST /v1/chat/completions through a real server on loopback, read with the official openai client: the template's
// rendering, streaming, logprobs, template errors and runaway templates, a model without a template, dropped clients.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeHubModel, Engine, ReferenceBackend, generationTokenIds } from '@flexhelm/engine';
import { loadTokenizerFolder, localOptWindowService, writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { readChatSetup } from './chat-setup.js';
import { TextWorkers } from './text-workers.js';
import { ChatTemplateError, readChatTemplate } from './chat-template.js';
import { startServer, type RunningServer } from './start-server.js';
import { loadTinyModel, MODEL_NAME, post, serve, type TinyModel } from './test-server.js';
import { OrtBackend } from '@flexhelm/ort-backend';

// A ChatML-like template on the OPT-shaped tokenizer's own specials: `</s>` (id 2) is both its BOS and EOS.
const TEMPLATE = [
  '{{ bos_token }}',
  '{% for m in messages %}',
  "{% if m.content == 'boom' %}{{ raise_exception('the word boom is not allowed') }}{% endif %}",
  "{% if m.content == 'spin' %}{% for i in range(4000) %}{% for j in range(4000) %}{% endfor %}{% endfor %}{% endif %}",
  '{{ m.role }}: {{ m.content | trim }}\n',
  '{% endfor %}',
  "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}",
].join('');

/** What the template renders, written out independently. */
const rendered = (messages: { role: string; content: string }[]) => `</s>${messages.map((m) => `${m.role}: ${m.content.trim()}\n`).join('')}assistant:`;

let model: TinyModel;
let server: RunningServer;
let plain: RunningServer;
const logs: string[] = [];
let client: OpenAI;

beforeAll(async () => {
  model = await loadTinyModel();
  const configPath = join(model.modelDir, 'tokenizer_config.json');
  const config = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
  writeFileSync(configPath, JSON.stringify({ ...config, chat_template: TEMPLATE, bos_token: '</s>', eos_token: { content: '</s>' } }));
  const chat = readChatSetup(model.modelDir, model.tokenizer, generationTokenIds(model.engine.description).eos);
  server = await serve(model, { outputPath: `${model.root}/out`, chat, chatTemplateTimeoutMs: 300, log: (m) => logs.push(m) });
  plain = await serve(model, { outputPath: `${model.root}/out-plain` });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'not-checked-here', maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await server?.close();
  await plain?.close();
  await model?.engine.close();
});

const messages = [
  { role: 'system' as const, content: 'You answer briefly.' },
  { role: 'user' as const, content: '  What is the capital of France?  ' },
];

describe('chat completions with the model’s chat template', () => {
  it('renders the messages with the template, adds no second BOS, and answers as chat.completion', async () => {
    const r = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: 6, temperature: 0 });
    expect(r.object).toBe('chat.completion');
    expect(r.id).toMatch(/^chatcmpl-/);
    expect(r.choices).toHaveLength(1);
    expect(r.choices[0]!.message.role).toBe('assistant');
    const promptIds = model.tokenizer.encode(rendered(messages)).map(Number);
    expect(promptIds[0]).toBe(2); // the template's own </s>, parsed as the special token
    expect(promptIds[1]).not.toBe(2);
    expect(r.usage?.prompt_tokens).toBe(promptIds.length);
    // The same ids through /v1/completions (fed as given) generate the same text.
    const direct = await post(`${server.url}/v1/completions`, { prompt: promptIds, max_tokens: 6, temperature: 0 });
    expect(direct.status).toBe(200);
    expect(r.choices[0]!.finish_reason).toBe(direct.json.choices[0].finish_reason);
    if (r.choices[0]!.finish_reason === 'length') expect(r.choices[0]!.message.content).toBe(direct.json.choices[0].text);
    expect(r.usage?.completion_tokens).toBe(direct.json.usage.completion_tokens);
  }, 60_000);

  it('streams chat.completion.chunk events the official client reads, matching the whole answer', async () => {
    const whole = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: 5, temperature: 0, n: 2 });
    const stream = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: 5, temperature: 0, n: 2, stream: true, stream_options: { include_usage: true } });
    const content = ['', ''];
    const finish: (string | null)[] = [null, null];
    let usage: unknown;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      for (const c of chunk.choices) {
        content[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(content).toEqual(whole.choices.map((c) => c.message.content));
    expect(finish).toEqual(whole.choices.map((c) => c.finish_reason));
    expect(usage).toEqual(whole.usage);
  }, 60_000);

  it('streams the role first, then the text token by token before the answer is done, and the finish reason last', async () => {
    const body = { model: MODEL_NAME, messages, max_tokens: 48, temperature: 1, seed: 5, n: 2 };
    const whole = await client.chat.completions.create(body);
    const before = server.batcher.stats.tokens;
    let tokensAtFirstText = -1;
    const chunks: { index: number; delta: { role?: string; content?: string | null }; finish_reason: string | null }[] = [];
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      for (const c of chunk.choices) {
        if (tokensAtFirstText < 0 && c.delta.content) tokensAtFirstText = server.batcher.stats.tokens - before;
        chunks.push(c);
      }
    }
    for (const expected of whole.choices) {
      const mine = chunks.filter((c) => c.index === expected.index);
      expect(mine[0]!.delta).toEqual({ role: 'assistant', content: '' });
      expect(mine.at(-1)).toMatchObject({ delta: {}, finish_reason: expected.finish_reason });
      expect(mine.slice(1, -1).every((c) => c.finish_reason === null && c.delta.role === undefined)).toBe(true);
      expect(mine.map((c) => c.delta.content ?? '').join('')).toBe(expected.message.content);
      // Token by token: many content chunks, not one.
      if (expected.finish_reason === 'length') expect(mine.length).toBeGreaterThan(24);
    }
    // The first text went out before both rows' 96 tokens were generated.
    expect(tokensAtFirstText).toBeGreaterThanOrEqual(1);
    expect(tokensAtFirstText).toBeLessThan(96);
  }, 60_000);

  it('holds back text that may be a stop sequence: streamed equals whole for stops cut from the answer', async () => {
    const base = { model: MODEL_NAME, messages, max_tokens: 20, temperature: 1, seed: 12 };
    const free = (await client.chat.completions.create(base)).choices[0]!.message.content!;
    for (let at = 1; at + 3 < free.length; at += Math.max(1, Math.floor(free.length / 8))) {
      const stop = [free.slice(at, at + 3), '@@never'];
      const whole = await client.chat.completions.create({ ...base, stop });
      let text = '';
      let finish: string | null = null;
      for await (const chunk of await client.chat.completions.create({ ...base, stop, stream: true })) {
        for (const c of chunk.choices) {
          expect(c.delta.content ?? '').not.toContain(stop[0]);
          text += c.delta.content ?? '';
          finish = c.finish_reason ?? finish;
        }
      }
      expect(text, JSON.stringify(stop)).toBe(whole.choices[0]!.message.content);
      expect(finish).toBe('stop');
    }
  }, 60_000);

  it('reports logprobs in the chat format: one entry per token, its bytes, and top_logprobs alternatives', async () => {
    const r = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 });
    const entries = r.choices[0]!.logprobs!.content!;
    expect(entries).toHaveLength(r.usage!.completion_tokens);
    for (const e of entries) {
      expect(e.logprob).toBeLessThanOrEqual(0);
      expect(e.top_logprobs).toHaveLength(3);
      // Greedy: the chosen token is the most likely one.
      expect(e.logprob).toBeCloseTo(e.top_logprobs[0]!.logprob, 5);
      expect(Buffer.from(e.bytes!).toString('utf8')).toBe(e.token);
    }
    if (r.choices[0]!.finish_reason === 'length') expect(entries.map((e) => e.token).join('')).toBe(r.choices[0]!.message.content);
  }, 60_000);

  it('turns the template’s raise_exception into a 400 with its message', async () => {
    const r = await post(`${server.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'boom' }] });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe(`the chat template of ${MODEL_NAME} refused these messages: the word boom is not allowed`);
    expect(r.json.error.message).not.toContain(model.root); // the model id, never the server's folders
    expect(r.json.error.param).toBe('messages');
  });

  it('stops a template that runs away with a 400, and keeps serving', async () => {
    const t0 = performance.now();
    const r = await post(`${server.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'spin' }], max_tokens: 1 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/took longer than 300 ms to render/);
    expect(performance.now() - t0).toBeLessThan(30_000);
    const next = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: 2, temperature: 0 });
    expect(next.choices[0]!.message.role).toBe('assistant');
  }, 60_000);

  it('refuses hostile or unsupported bodies with 400s naming the parameter', async () => {
    const cases: [unknown, string, RegExp][] = [
      [{ messages: [] }, 'messages', /at least one message/],
      [{ messages: [{ role: 'wizard', content: 'hi' }] }, 'messages', /role must be one of/],
      [{ messages: [{ role: 'user', content: 42 }] }, 'messages', /content must be a string/],
      [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages', /content must be a string/],
      [{ messages, tools: [{ type: 'function' }] }, 'tools', /not supported/],
      [{ messages, top_logprobs: 2 }, 'top_logprobs', /needs logprobs=true/],
      [{ messages, max_tokens: 100_000 }, 'max_tokens', /above this server's limit/],
      [{ messages, model: 'gpt-4' }, 'model', /does not exist on this server/],
    ];
    for (const [body, param, message] of cases) {
      const r = await post(`${server.url}/v1/chat/completions`, body);
      expect([400, 404], JSON.stringify(body)).toContain(r.status);
      expect(r.json.error.param, JSON.stringify(body)).toBe(param);
      expect(r.json.error.message, JSON.stringify(body)).toMatch(message);
    }
    // A prompt over the window: 100 long messages.
    const long = Array.from({ length: 100 }, (_, i) => ({ role: 'user', content: `message ${i} `.repeat(20) }));
    const over = await post(`${server.url}/v1/chat/completions`, { messages: long, max_tokens: 10 });
    expect(over.status).toBe(400);
    expect(over.json.error.code).toBe('context_length_exceeded');
  }, 60_000);

  it('answers 400 on a model without a chat template', async () => {
    const r = await post(`${plain.url}/v1/chat/completions`, { messages });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('model_not_chat');
    expect(r.json.error.message).toMatch(/has no chat template/);
  });

  it('drops the rows of a client that goes away and logs one info line', async () => {
    const start = logs.length;
    const { hostname, port } = new URL(server.url);
    const payload = JSON.stringify({ messages, n: 16, max_tokens: 64, temperature: 1, seed: 3 });
    const socket = connect(Number(port), hostname);
    socket.on('error', () => {});
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`);
    const deadline = Date.now() + 60_000;
    while (server.batcher.inFlight === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    socket.destroy();
    while ((server.batcher.inFlight > 0 || logs.length === start) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(logs.slice(start)).toEqual([expect.stringMatching(/^client closed the connection: POST \/v1\/chat\/completions/)]);
  }, 90_000);
});

describe('reading a model’s chat template', () => {
  it('takes the "default" of a list of named templates, and fails on broken ones with the file named', () => {
    const dir = join(model.root, 'templates');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: [{ name: 'tool_use', template: 'T' }, { name: 'default', template: 'D{{ 1 }}' }] }));
    expect(readChatTemplate(dir)?.source).toBe('D{{ 1 }}');
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{% for m in messages %}' }));
    expect(() => readChatTemplate(dir)).toThrow(ChatTemplateError);
    expect(() => readChatTemplate(dir)).toThrow(/tokenizer_config\.json: the chat template does not compile/);
    writeFileSync(join(dir, 'tokenizer_config.json'), '{"chat_template": ');
    expect(() => readChatTemplate(dir)).toThrow(/is not a valid tokenizer config/);
    writeFileSync(join(dir, 'tokenizer_config.json'), '{}');
    expect(readChatTemplate(dir)).toBeUndefined();
  });
});

describe('chat completions for a Llama-3-shaped instruct model', () => {
  it('renders Llama 3’s template, stops at <|eot_id|> or <|end_of_text|>, and answers through the official client', async () => {
    const dir = join(model.root, 'llama-chat');
    makeHubModel({
      config: { base: 'llama-3.2-1b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 1, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 50_400, chat: true },
      outDir: dir,
      seed: 4,
      dtype: 'bf16',
      tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o),
    });
    const engine = await Engine.load(dir, { backend: new OrtBackend() });
    const tokenizer = loadTokenizerFolder(dir, 'local/llama-chat');
    const chat = readChatSetup(dir, tokenizer, engine.description.eosTokenId)!;
    expect(chat).toBeDefined();
    const eot = tokenizer.tokenToId('<|eot_id|>')!;
    expect(chat.endTokenIds).toContain(eot);
    const llama = await startServer({ engine, tokenizer, windowService: localOptWindowService(tokenizer, engine.description.maxPositions), chat, modelName: 'local/llama-chat', modelId: 'llama-chat', outputPath: join(model.root, 'out-llama'), offline: true });
    try {
      const c = new OpenAI({ baseURL: `${llama.url}/v1`, apiKey: 'not-checked-here', maxRetries: 0 });
      const r = await c.chat.completions.create({ model: 'local/llama-chat', messages, max_tokens: 5, temperature: 0 });
      expect(r.choices[0]!.message.role).toBe('assistant');
      // The template writes <|begin_of_text|> itself: the prompt starts with exactly one BOS and ends with the
      // assistant header the generation prompt adds.
      const renderer = new TextWorkers({ template: chat.template, tokenizerName: 'local/llama-chat', modelLabel: 'local/llama-chat' });
      const text = await renderer.render(messages.map((m) => ({ role: m.role, content: m.content })));
      await renderer.close();
      expect(text.startsWith('<|begin_of_text|>')).toBe(true);
      expect(text.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\n')).toBe(true);
      const ids = tokenizer.encode(text).map(Number);
      expect(ids.filter((id) => id === engine.description.bosTokenId)).toHaveLength(1);
      expect(r.usage!.prompt_tokens).toBe(ids.length);
      expect(r.choices[0]!.message.content).not.toContain('<|eot_id|>');
      // Streamed: the same text, the end-of-turn token never shown.
      let streamed = '';
      for await (const chunk of await c.chat.completions.create({ model: 'local/llama-chat', messages, max_tokens: 5, temperature: 0, stream: true })) {
        streamed += chunk.choices.map((x) => x.delta.content ?? '').join('');
      }
      expect(streamed).toBe(r.choices[0]!.message.content);
    } finally {
      await llama.close();
      await engine.close();
    }
  }, 120_000);
});

describe('chat for Gemma 2, Phi-3 and OLMo 2 instruct folders (make-model with "chat": true)', () => {
  // Each family's template as published, its end-of-turn marker from the family entry, and the prompt it renders.
  const cases = [
    { base: 'gemma-2-2b', end: ['<end_of_turn>', '<eos>'], starts: '<bos><start_of_turn>user\nHi there<end_of_turn>\n', ends: '<start_of_turn>model\n' },
    { base: 'phi-3-mini-4k', end: ['<|end|>', '<|endoftext|>'], starts: '<|user|>\nHi there<|end|>\n', ends: '<|assistant|>\n' },
    { base: 'olmo-2-7b', end: ['<|endoftext|>'], starts: '<|endoftext|><|user|>\nHi there\n', ends: '<|assistant|>\n' },
  ];
  it.each(cases)('$base: renders its template, stops at its end-of-turn tokens, answers a chat completion', async ({ base, end, starts, ends }) => {
    const dir = join(model.root, `${base}-chat`);
    makeHubModel({
      config: { base, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 1024, chat: true },
      outDir: dir,
      seed: 4,
      dtype: 'f32',
      tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o),
    });
    // The reference backend computes every family (the fast backends may not yet).
    const engine = await Engine.load(dir, { backend: new ReferenceBackend() });
    const tokenizer = loadTokenizerFolder(dir, `local/${base}`);
    const chat = readChatSetup(dir, tokenizer, engine.description.eosTokenId, engine.description.family)!;
    expect(chat).toBeDefined();
    for (const token of end) expect(chat.endTokenIds).toContain(tokenizer.tokenToId(token));
    const renderer = new TextWorkers({ template: chat.template, tokenizerName: `local/${base}`, modelLabel: `local/${base}` });
    const text = await renderer.render([{ role: 'user', content: 'Hi there' }]);
    await renderer.close();
    expect(text).toBe(starts + ends);
    const running = await startServer({ engine, tokenizer, windowService: localOptWindowService(tokenizer, engine.description.maxPositions), chat, modelName: `local/${base}`, modelId: base, outputPath: join(model.root, `out-${base}`), offline: true });
    try {
      const c = new OpenAI({ baseURL: `${running.url}/v1`, apiKey: 'not-checked-here', maxRetries: 0 });
      const r = await c.chat.completions.create({ model: `local/${base}`, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 4, temperature: 0 });
      expect(r.choices[0]!.message.role).toBe('assistant');
      expect(r.usage!.prompt_tokens).toBe(tokenizer.encode(text).length);
      for (const token of end) expect(r.choices[0]!.message.content).not.toContain(token);
    } finally {
      await running.close();
      await engine.close();
    }
  }, 120_000);
});
