import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { request } from '@flexhelm/core';
import { makeHubModel, Engine } from '@flexhelm/engine';
import { loadTokenizerFolder, writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { EngineExecutor } from './engine-executor.js';

const root = mkdtempSync(join(tmpdir(), 'executor-bos-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tiny = { hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 700 };

/** The echoed prompt tokens of `prompt` (max_tokens 0) on a made model of `base`, with the ids its tokenizer gives. */
async function echo(base: string, prompt: string) {
  const dir = join(root, base);
  makeHubModel({ config: { base, ...tiny }, outDir: dir, seed: 4, tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o) });
  const tokenizer = loadTokenizerFolder(dir);
  const engine = await Engine.load(dir, { backend: 'reference' });
  try {
    const executor = new EngineExecutor(engine, tokenizer, { modelId: base });
    const [result] = await executor.execute([request({ model: `local/${base}`, prompt, echo_prompt: true, max_tokens: 0, temperature: 0 })]);
    return { tokens: result!.completions[0]!.tokens, ids: tokenizer.encode(prompt).map(Number), config: JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>, tokenizer };
  } finally {
    await engine.close();
  }
}

describe('EngineExecutor prompt prefix by family', () => {
  it('feeds a Qwen2 prompt as its tokenizer encodes it: no BOS, although config.json names <|endoftext|> as bos_token_id', async () => {
    const { tokens, ids, config, tokenizer } = await echo('qwen2-0.5b', 'The answer is 42');
    expect(config.bos_token_id).toBe(697);
    expect(tokenizer.bosTokenId).toBeUndefined();
    expect(tokens.map((t) => t.text)).toEqual(ids.map((id) => tokenizer.decode([id])));
    // Nothing before the first prompt token: it has no logprob (0.0, as for any model input's first token).
    expect(tokens[0]!.logprob).toBe(0);
    expect(tokens[1]!.logprob).toBeLessThan(0);
  }, 120_000);

  it('still prefixes a Llama 3 prompt with <|begin_of_text|> (its tokenizer adds it): the first prompt token has a logprob', async () => {
    const { tokens, ids, tokenizer } = await echo('llama-3.2-1b', 'The answer is 42');
    expect(tokenizer.bosTokenId).toBeDefined();
    expect(tokens.map((t) => t.text)).toEqual(ids.map((id) => tokenizer.decode([id])));
    expect(tokens[0]!.logprob).toBeLessThan(0);
  }, 120_000);
});
