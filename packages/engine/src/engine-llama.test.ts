import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Engine } from './engine.js';
import { llamaDescriptionFromHf } from './llama-description.js';
import { expectMatchesNaive } from './test-matches-naive.js';

// The reference-backend half of Engine's tests; the onnxruntime half is @flexhelm/ort-backend's engine-ort.test.ts.
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('Llama-family models through Engine (reference backend, random weights)', () => {
  const small = { vocab_size: 97, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 48, max_position_embeddings: 64, rope_theta: 10000 };

  it('qwen2-like: one kv head for all four query heads, q/k/v biases, tied head, left padding', async () => {
    const config = { ...small, model_type: 'qwen2', num_key_value_heads: 1, rms_norm_eps: 1e-6, tie_word_embeddings: true };
    const d = llamaDescriptionFromHf(config);
    expect([d.attention.kvHeads, d.attention.bias, d.embedding.tiedHead, d.checkpointNames?.head]).toEqual([1, true, true, undefined]);
    await expectMatchesNaive(llamaDescriptionFromHf(config), [[3, 50, 96, 7, 7, 12], [5, 9]], 11);
  });

  it('mistral: a sliding window of 3 with left padding longer than the window (HF padded-index convention)', async () => {
    const config = { ...small, model_type: 'mistral', num_key_value_heads: 2, rms_norm_eps: 1e-5, sliding_window: 3 };
    // Row 1 has 8 pads before its 2 tokens; row 0's 10 tokens reach past the window.
    await expectMatchesNaive(llamaDescriptionFromHf(config), [[1, 4, 9, 16, 25, 36, 49, 64, 81, 2], [1, 30]], 5);
  });

  it('never blocks on a FIFO config.json (the model_type is read like any model text, regular files only)', async () => {
    const folder = join(dir, 'fifo-config');
    mkdirSync(folder);
    execFileSync('mkfifo', [join(folder, 'config.json')]);
    // Without the check readFileSync waits for a writer forever, in the event loop.
    await expect(Engine.load(folder, { backend: 'reference' })).rejects.toThrow(/fifo-config\/config\.json is not a regular file/);
  });
});
