import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { llamaDescriptionFromHf, type ModelDescription } from '@flexhelm/engine';
import { f16ToF32, f32ToF16 } from '@flexhelm/pinned-memory';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePolicy, percentsFromArgs } from './policy.js';
import { TieredEmbedding } from './tiered-embedding.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-embed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = llamaDescriptionFromHf({
  model_type: 'llama', hidden_size: 48, head_dim: 16, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, vocab_size: 40,
  max_position_embeddings: 64, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: true,
});
// Gemma's embedding scale: sqrt(hidden), rounded to float32 as transformers' float32 normalizer is.
const scaled: ModelDescription = { ...base, embedding: { ...base.embedding, scale: Math.sqrt(48) } };

describe('TieredEmbedding', () => {
  it("multiplies the token rows by the description's embedding scale on every tier (float32 factor)", async () => {
    const table = new Float32Array(40 * 48).map((_, i) => Math.sin(i) / 4);
    // The host and disk tiers hold f16: the expected rows are the table rounded to f16, times fround(sqrt(48)).
    const f16 = await f16ToF32(await f32ToF16(table));
    const ids = Int32Array.from([3, 39, 3, 0]);
    const factor = Math.fround(Math.sqrt(48));
    for (const [percent, source] of [[[100, 0], table], [[0, 100], f16], [[0, 0], f16]] as const) {
      const policy = parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, ...percentsFromArgs([...percent, 100, 0, 100, 0]) });
      const embedding = new TieredEmbedding(scaled, policy, join(dir, `t${percent.join('-')}`), false);
      await embedding.load({ tokens: table.slice() } as never);
      const out = await embedding.embed(ids, new Int32Array(4));
      const expected = new Float32Array(4 * 48);
      ids.forEach((id, i) => { for (let j = 0; j < 48; j++) expected[i * 48 + j] = Math.fround(source[id * 48 + j]! * factor); });
      expect(out).toEqual(expected);
      // Without a scale the rows are the table's.
      const plain = new TieredEmbedding(base, policy, join(dir, `p${percent.join('-')}`), false);
      await plain.load({ tokens: table.slice() } as never);
      expect((await plain.embed(ids, new Int32Array(4))).subarray(48, 96)).toEqual(source.subarray(39 * 48, 40 * 48));
    }
  });

});
