import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeHubModel } from '@flexhelm/engine';
import { exportGguf, importGguf, readGguf } from '@flexhelm/gguf';
import { modelShapeOfDescription, parsePolicy, percentsFromArgs, planMemory } from '@flexhelm/offload';
import { writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { afterAll, describe, expect, it } from 'vitest';
import { oneDnnUsability } from './decide-backend.js';
import { planShape } from './plan-shape.js';

const root = mkdtempSync(join(tmpdir(), 'plan-shape-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tiny = { base: 'llama-3.2-1b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 700 };

const made = new Map<string, { file: string; description: ReturnType<typeof importGguf>['description'] }>();

/** A tiny Llama 3.2 exported as `type` (made once per type). */
function gguf(type: 'Q4_0' | 'F16') {
  if (!made.has(type)) made.set(type, makeGguf(type));
  return made.get(type)!;
}

function makeGguf(type: 'Q4_0' | 'F16') {
  const hub = join(root, `hub-${type}`);
  makeHubModel({ config: tiny, outDir: hub, seed: 2, tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o) });
  const file = join(root, `tiny-${type}.gguf`);
  exportGguf({ folder: hub, out: file, type });
  return { file, description: importGguf(file, join(root, `data-${type}`)).description };
}

describe('planShape: what the memory plan counts for a GGUF file', () => {
  it.skipIf(!oneDnnUsability().usable)('on oneDNN, a Q4_0 file: every matrix and the tied head at their blocks\' bytes, the token table at none (read from the file)', () => {
    const { file, description } = gguf('Q4_0');
    const shape = planShape(description, file, 'auto');
    const bytes = new Map(readGguf(file).tensors.map((t) => [t.name, t.byteLength]));
    const held = shape.family!.held!;
    expect(held['embed_tokens.weight']).toBe(0);
    expect(held['lm_head.weight']).toBe(bytes.get('token_embd.weight'));
    expect(held['layers.1.mlp.down_proj.weight']).toBe(bytes.get('blk.1.ffn_down.weight'));
    expect(held['layers.0.self_attn.k_proj.weight']).toBe(bytes.get('blk.0.attn_k.weight'));
    // 7 matrices a layer, no norms.
    expect(Object.keys(held).filter((k) => k.startsWith('layers.')).length).toBe(2 * 7);
    const resident = parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, ...percentsFromArgs([100, 0, 100, 0, 100, 0]) });
    const plain = modelShapeOfDescription(description);
    expect(planMemory(shape, resident, { promptLen: 8, genLen: 2 }).weights.compute).toBeLessThan(planMemory(plain, resident, { promptLen: 8, genLen: 2 }).weights.compute / 4);
  });

  it('no blocks counted where none are held: fp32 (onnxruntime), a file without kept types, a model that is not a GGUF file', () => {
    const q = gguf('Q4_0');
    expect(planShape(q.description, q.file, 'fp32').family!.held).toBeUndefined();
    expect(planShape(q.description, undefined, 'auto').family!.held).toBeUndefined();
    const f16 = gguf('F16');
    expect(planShape(f16.description, f16.file, 'auto').family!.held).toBeUndefined();
  });
});
