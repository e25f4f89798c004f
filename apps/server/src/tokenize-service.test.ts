// vLLM's /tokenize and /detokenize through a real server on loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from './start-server.js';
import { loadTinyModel, MODEL_NAME, post, serve, type TinyModel } from './test-server.js';

let model: TinyModel;
let server: RunningServer;
beforeAll(async () => {
  model = await loadTinyModel();
  server = await serve(model, { outputPath: `${model.root}/out`, apiKey: 'tokenize-test-key' });
}, 120_000);
afterAll(async () => {
  await server?.close();
  await model?.engine.close();
});

const auth = { authorization: 'Bearer tokenize-test-key' };

describe('/tokenize and /detokenize', () => {
  it('answer with vLLM’s shapes, the prompt as /v1/completions feeds it to the model', async () => {
    const plain = model.tokenizer.encode('Hello world').map(Number);
    const r = await post(`${server.url}/tokenize`, { model: MODEL_NAME, prompt: 'Hello world', return_token_strs: true }, auth);
    expect(r.status).toBe(200);
    // OPT's tokenizer starts every model input with </s> (id 2), as the completions do.
    expect(r.json).toEqual({ count: plain.length + 1, max_model_len: model.engine.description.maxPositions, tokens: [2, ...plain], token_strs: ['</s>', 'Hello', 'Ġworld'] });
    const bare = await post(`${server.url}/tokenize`, { prompt: 'Hello world', add_special_tokens: false }, auth);
    expect(bare.json).toMatchObject({ count: plain.length, tokens: plain, token_strs: null });
    const back = await post(`${server.url}/detokenize`, { tokens: plain }, auth);
    expect([back.status, back.json]).toEqual([200, { prompt: 'Hello world' }]);
    // The same count the completions report.
    const c = await post(`${server.url}/v1/completions`, { prompt: 'Hello world', max_tokens: 1 }, auth);
    expect(c.json.usage.prompt_tokens).toBe(r.json.count);
  }, 60_000);

  it('decode in the text workers, never on the event loop: a quarter of a million ids gives the same text', async () => {
    // Issue 26: /detokenize of a 1 MiB body decoded on the main thread (half a second that held /healthz too). The
    // server's own tokenizer (the one on the event loop) is watched: it must not decode, and the answer is unchanged.
    let mainThreadDecodes = 0;
    const watched = new Proxy(model.tokenizer, {
      get(target, key, receiver) {
        if (key === 'decode') {
          return (...args: Parameters<typeof target.decode>) => {
            mainThreadDecodes++;
            return target.decode(...args);
          };
        }
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const watchedServer = await serve({ ...model, tokenizer: watched }, { outputPath: `${model.root}/out-decode` });
    try {
      const ids = model.tokenizer.encode('Hello world, and more.').map(Number);
      const many = Array.from({ length: 250_000 }, (_, i) => ids[i % ids.length]!);
      const back = await post(`${watchedServer.url}/detokenize`, { tokens: many });
      expect(back.status).toBe(200);
      expect(back.json.prompt).toBe(model.tokenizer.decode(many));
      const strs = await post(`${watchedServer.url}/tokenize`, { prompt: 'Hello world', return_token_strs: true, add_special_tokens: false });
      expect(strs.json.token_strs).toEqual(['Hello', 'Ġworld']);
      expect(mainThreadDecodes).toBe(0);
    } finally {
      await watchedServer.close();
    }
  }, 120_000);

  it('refuse bad requests in OpenAI’s shape, and need the API key as /v1 does', async () => {
    const cases: [string, unknown, number, string | null][] = [
      ['/tokenize', { prompt: 'x', messages: [] }, 400, 'prompt'],
      ['/tokenize', {}, 400, 'prompt'],
      ['/tokenize', { messages: [{ role: 'user', content: 'hi' }] }, 400, 'messages'],
      ['/tokenize', { prompt: 'x', model: 'gpt-4' }, 404, 'model'],
      ['/detokenize', { tokens: [1, 999_999] }, 400, 'tokens'],
      ['/detokenize', { tokens: 'abc' }, 400, 'tokens'],
    ];
    for (const [path, body, status, param] of cases) {
      const r = await post(`${server.url}${path}`, body, auth);
      expect([r.status, r.json.error.param], JSON.stringify(body)).toEqual([status, param]);
    }
    expect((await post(`${server.url}/tokenize`, { prompt: 'x' })).status).toBe(401);
    const get = await fetch(`${server.url}/tokenize`, { headers: auth });
    expect(get.status).toBe(405);
  });
});
