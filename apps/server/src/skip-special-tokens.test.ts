// vLLM's skip_special_tokens on a Llama-3-shaped model whose small vocabulary is a quarter special tokens, so sampled
// answers hold many: left out of the text (and logprobs) by default, kept with skip_special_tokens=false.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeHubModel, Engine } from '@flexhelm/engine';
import { loadTokenizerFolder, localOptWindowService, writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { specialTokenIds } from './special-token-ids.js';
import { startServer, type RunningServer } from './start-server.js';
import { post } from './test-server.js';
import { OrtBackend } from '@flexhelm/ort-backend';

const dir = join(mkdtempSync(join(tmpdir(), 'flexhelm-skip-special-')), 'llama');
let engine: Engine;
let server: RunningServer;
let specials: Set<number>;

beforeAll(async () => {
  makeHubModel({
    config: { base: 'llama-3.2-1b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 1, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 1024 },
    outDir: dir,
    seed: 7,
    dtype: 'bf16',
    tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o),
  });
  engine = await Engine.load(dir, { backend: new OrtBackend() });
  const tokenizer = loadTokenizerFolder(dir, 'local/llama');
  specials = specialTokenIds(dir);
  server = await startServer({ engine, tokenizer, windowService: localOptWindowService(tokenizer, engine.description.maxPositions), tokenizerFolder: dir, modelName: 'local/llama', modelId: 'llama', outputPath: join(dir, '..', 'out'), offline: true });
}, 120_000);
afterAll(async () => {
  await server?.close();
  await engine?.close();
});

describe('skip_special_tokens', () => {
  it('leaves special tokens out of completions by default and keeps them when false, the rest unchanged', async () => {
    expect(specials.size).toBeGreaterThan(100);
    const body = { prompt: 'Once upon a time', max_tokens: 48, temperature: 1.5, seed: 11, n: 4, logprobs: 1 };
    const kept = await post(`${server.url}/v1/completions`, { ...body, skip_special_tokens: false });
    const skipped = await post(`${server.url}/v1/completions`, body);
    expect([kept.status, skipped.status]).toEqual([200, 200]);
    const specialText = /<\|[a-z_0-9]+\|>/g;
    let seen = 0;
    for (let i = 0; i < 4; i++) {
      const k = kept.json.choices[i];
      const s = skipped.json.choices[i];
      seen += (k.text.match(specialText) ?? []).length;
      expect(s.text).not.toMatch(specialText);
      // The same sampled tokens: the skipped answer is the kept one without its special tokens' text.
      expect(s.text).toBe(k.text.replace(specialText, ''));
      expect(s.logprobs.tokens).toEqual(k.logprobs.tokens.filter((t: string) => !/^<\|[a-z_0-9]+\|>$/.test(t)));
    }
    expect(seen).toBeGreaterThan(0);
    // Streamed, the same text.
    const res = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, n: 1, logprobs: undefined, stream: true }) });
    const streamed = (await res.text()).split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)).choices[0]?.text ?? '').join('');
    const whole = await post(`${server.url}/v1/completions`, { ...body, n: 1, logprobs: undefined });
    expect(streamed).toBe(whole.json.choices[0].text);
  }, 120_000);
});
