import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rmsNorm } from './llama-reference.js';
import { ModelFileError } from './model-file-error.js';
import { Engine, type BatchRun } from './engine.js';
import { writeSafetensors, type TensorToWrite } from './safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-llama-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const H = 16;
const heads = 4;
const hd = 4;
const I = 24;
const V = 50;
const LAYERS = 2;

/** A deterministic pseudo-random stream (LCG) so the test needs no weights files of its own. */
function values(n: number, seed: number, scale: number, offset = 0): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = offset + scale * (s / 2 ** 32 - 0.5);
  }
  return out;
}

function config(kvHeads: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_type: 'qwen2', vocab_size: V, hidden_size: H, num_hidden_layers: LAYERS, num_attention_heads: heads, num_key_value_heads: kvHeads,
    intermediate_size: I, max_position_embeddings: 64, rms_norm_eps: 1e-6, rope_theta: 1e6, tie_word_embeddings: true, ...over,
  };
}

/**
 * Tensors of a qwen2 model with `kvHeads` kv heads. `expandTo` writes the same model as one with more kv heads by
 * repeating each kv head's k/v rows the way repeat_kv shares them (kv head g serves q heads g·group … (g+1)·group − 1).
 */
function tensors(kvHeads: number, expandTo = kvHeads): TensorToWrite[] {
  const t: TensorToWrite[] = [];
  const add = (name: string, shape: number[], data: Float32Array) => t.push({ name, shape, dtype: 'F32', data });
  const expand = (x: Float32Array, perRow: number): Float32Array => {
    const rep = expandTo / kvHeads;
    const out = new Float32Array(x.length * rep);
    for (let g = 0; g < kvHeads; g++) for (let r = 0; r < rep; r++) out.set(x.subarray(g * hd * perRow, (g + 1) * hd * perRow), (g * rep + r) * hd * perRow);
    return out;
  };
  add('model.embed_tokens.weight', [V, H], values(V * H, 1, 1));
  add('model.norm.weight', [H], values(H, 2, 0.5, 1));
  for (let l = 0; l < LAYERS; l++) {
    const p = `model.layers.${l}.`;
    const s = 100 * (l + 1);
    add(`${p}input_layernorm.weight`, [H], values(H, s + 1, 0.5, 1));
    add(`${p}post_attention_layernorm.weight`, [H], values(H, s + 2, 0.5, 1));
    add(`${p}self_attn.q_proj.weight`, [heads * hd, H], values(heads * hd * H, s + 3, 1));
    add(`${p}self_attn.q_proj.bias`, [heads * hd], values(heads * hd, s + 4, 0.4));
    add(`${p}self_attn.k_proj.weight`, [expandTo * hd, H], expand(values(kvHeads * hd * H, s + 5, 1), H));
    add(`${p}self_attn.k_proj.bias`, [expandTo * hd], expand(values(kvHeads * hd, s + 6, 0.4), 1));
    add(`${p}self_attn.v_proj.weight`, [expandTo * hd, H], expand(values(kvHeads * hd * H, s + 7, 1), H));
    add(`${p}self_attn.v_proj.bias`, [expandTo * hd], expand(values(kvHeads * hd, s + 8, 0.4), 1));
    add(`${p}self_attn.o_proj.weight`, [H, heads * hd], values(H * heads * hd, s + 9, 0.5));
    add(`${p}mlp.gate_proj.weight`, [I, H], values(I * H, s + 10, 0.5));
    add(`${p}mlp.up_proj.weight`, [I, H], values(I * H, s + 11, 0.5));
    add(`${p}mlp.down_proj.weight`, [H, I], values(H * I, s + 12, 0.5));
  }
  return t;
}

function writeModel(name: string, cfg: Record<string, unknown>, t: TensorToWrite[]): string {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, 'config.json'), JSON.stringify(cfg));
  writeSafetensors(join(d, 'model.safetensors'), t);
  return d;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const ids = [
  [0, 0, 0, 1, 7, 9, 3],
  [1, 5, 49, 2, 2, 8, 11],
];
const mask = [
  [0, 0, 0, 1, 1, 1, 1],
  [1, 1, 1, 1, 1, 1, 1],
];
const T = ids[0]!.length;

const step = (run: BatchRun, ids: number[][], mask: number[][]) => run.stepLogits(ids, mask);
const forward = (engine: Engine, ids: number[][], mask: number[][]) => engine.forwardLogits(ids, mask);

const load = (d: string) => Engine.load(d, { backend: 'reference' });

describe('the Llama family through Engine and the reference backend', () => {
  it('grouped-query attention equals multi-head attention with each kv head repeated (repeat_kv order)', async () => {
    for (const kv of [1, 2]) {
      const gqa = await load(writeModel(`gqa${kv}`, config(kv), tensors(kv)));
      const mha = await load(writeModel(`mha${kv}`, config(heads), tensors(kv, heads)));
      const a = await forward(gqa, ids, mask);
      const b = await forward(mha, ids, mask);
      // Only the real positions are defined.
      for (let r = 0; r < 2; r++) {
        for (let t = 0; t < T; t++) {
          if (mask[r]![t]) expect(maxAbsDiff(a.subarray((r * T + t) * V, (r * T + t + 1) * V), b.subarray((r * T + t) * V, (r * T + t + 1) * V))).toBeLessThan(1e-5);
        }
      }
    }
  });

  it('a row alone, a left-padded batch and decoding through the KV cache give the same logits', async () => {
    const m = await load(writeModel('gqa1', config(1), tensors(1)));
    const full = await forward(m, ids, mask);
    const alone = await forward(m, [[1, 7, 9, 3]], [[1, 1, 1, 1]]);
    expect(maxAbsDiff(alone, full.subarray(3 * V, 7 * V))).toBeLessThan(1e-5);
    const run = m.startBatch(2);
    await step(run, ids.map((r) => r.slice(0, 5)), mask.map((r) => r.slice(0, 5)));
    for (const t of [5, 6]) {
      const s = await step(run, ids.map((r) => [r[t]!]), [[1], [1]]);
      for (let r = 0; r < 2; r++) expect(maxAbsDiff(s.subarray(r * V, (r + 1) * V), full.subarray((r * T + t) * V, (r * T + t + 1) * V))).toBeLessThan(1e-5);
    }
    await run.close();
  });

  it('a sliding window hides keys i − j ≥ window, in the no-cache forward and through the cache alike', async () => {
    const windowed = await load(writeModel('win', config(2, { use_sliding_window: true, sliding_window: 2, max_window_layers: LAYERS }), tensors(2)));
    const plain = await load(writeModel('gqa2', config(2), tensors(2)));
    const row = [[1, 4, 9, 16, 25, 36]];
    const ones = [[1, 1, 1, 1, 1, 1]];
    const w = await forward(windowed, row, ones);
    const p = await forward(plain, row, ones);
    // Positions 0 and 1 see at most 2 keys either way; later ones differ.
    expect(maxAbsDiff(w.subarray(0, 2 * V), p.subarray(0, 2 * V))).toBe(0);
    expect(maxAbsDiff(w.subarray(5 * V), p.subarray(5 * V))).toBeGreaterThan(1e-3);
    const run = windowed.startBatch(1);
    await step(run, [row[0]!.slice(0, 3)], [[1, 1, 1]]);
    await step(run, [[16]], [[1]]);
    await step(run, [[25]], [[1]]);
    expect(maxAbsDiff(await step(run, [[36]], [[1]]), w.subarray(5 * V))).toBeLessThan(1e-5);
    await run.close();
  });

  it('rmsNorm: weight · x / sqrt(mean(x²) + eps), no mean subtraction', () => {
    const y = rmsNorm(Float32Array.from([3, 4]), 1, 2, Float32Array.from([1, 2]), 0);
    // mean(x²) = 12.5 → x / 3.5355…
    expect(y[0]).toBeCloseTo(3 / Math.sqrt(12.5), 6);
    expect(y[1]).toBeCloseTo((2 * 4) / Math.sqrt(12.5), 6);
  });

  it('rejects missing, misshapen and unused tensors and token ids outside the vocabulary', async () => {
    const t = tensors(1);
    const missing = writeModel('missing', config(1), t.filter((x) => x.name !== 'model.layers.1.self_attn.k_proj.bias'));
    await expect(load(missing)).rejects.toThrow(ModelFileError);
    await expect(load(missing)).rejects.toThrow(/no tensor model\.layers\.1\.self_attn\.k_proj\.bias/);
    const untied = writeModel('untied', config(1, { tie_word_embeddings: false }), t);
    await expect(load(untied)).rejects.toThrow(/no tensor lm_head\.weight/);
    const extra = writeModel('extra', config(1), [...t, { name: 'model.layers.2.mlp.up_proj.weight', shape: [I, H], dtype: 'F32', data: new Float32Array(I * H) }]);
    await expect(load(extra)).rejects.toThrow(/tensor model\.layers\.2\.mlp\.up_proj\.weight is not part of a qwen2 model/);
    const shaped = writeModel('shaped', config(1, { intermediate_size: I + 1 }), t);
    await expect(load(shaped)).rejects.toThrow(/has shape \[24, 16\], config\.json implies \[25, 16\]/);
    const m = await load(writeModel('gqa1', config(1), t));
    const run = m.startBatch(1);
    await expect(run.step([[V]], [[1]])).rejects.toThrow(/token id 50 \(row 0\) is outside the vocabulary/);
    await run.close();
    await expect(load(join(dir, 'nope'))).rejects.toThrow(/does not exist/);
  });
});
