import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { exportOnnx } from './export-onnx.js';
import { readModelDescription } from '@flexhelm/engine';

const GOLDEN = join(import.meta.dirname, '../../../../shared/conformance/families');
const have = existsSync(GOLDEN);
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-export-families-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Golden {
  input_ids: number[][];
  attention_mask: number[][];
  /** `[rows][positions]`, each with the full logits (logits_layout `full`); null at pads. */
  prompt_logits: ({ logits: number[] } | null)[][];
}

/**
 * The exported whole-model graph (the onnxruntime layer builder's layers, with cos/sin, longrope's factor switch and
 * the masks computed in the graph) against transformers 4.47.1's prompt logits, run by onnxruntime directly.
 */
describe.skipIf(!have)('exportOnnx for Gemma 2, Phi-3, OLMo 2 and Mixtral (golden checkpoints)', () => {
  it.each(['gemma2-a', 'phi3-a', 'olmo2-a', 'mixtral-a'])('%s: the exported graph gives the golden prompt logits (≤ 1e-4)', async (model) => {
    const src = join(GOLDEN, model, 'bf16');
    const out = join(dir, model);
    exportOnnx(src, out);
    const d = readModelDescription(src);
    const g = JSON.parse(readFileSync(join(GOLDEN, model, 'golden.json'), 'utf8')) as Golden;
    const B = g.input_ids.length;
    const S = g.input_ids[0]!.length;
    const V = d.vocabSize;
    const session = await ort.InferenceSession.create(join(out, 'onnx', 'model.onnx'));
    try {
      const feeds: Record<string, ort.Tensor> = {
        input_ids: new ort.Tensor('int64', BigInt64Array.from(g.input_ids.flat().map(BigInt)), [B, S]),
        attention_mask: new ort.Tensor('int64', BigInt64Array.from(g.attention_mask.flat().map(BigInt)), [B, S]),
      };
      for (let i = 0; i < d.layers; i++) {
        for (const kv of ['key', 'value']) feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [B, d.attention.kvHeads, 0, d.attention.headDim]);
      }
      const logits = (await session.run(feeds)).logits!.data as Float32Array;
      let worst = 0;
      let checked = 0;
      for (let b = 0; b < B; b++) {
        for (let s = 0; s < S; s++) {
          const want = g.prompt_logits[b]![s];
          if (!g.attention_mask[b]![s] || !want) continue; // pad rows are never read
          checked++;
          for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(logits[(b * S + s) * V + v]! - want.logits[v]!));
        }
      }
      expect(checked).toBeGreaterThan(10);
      expect(worst).toBeLessThan(1e-4);
    } finally {
      await session.release();
    }
  });
});
