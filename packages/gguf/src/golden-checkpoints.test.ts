import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, ReferenceBackend } from '@flexhelm/engine';
import { writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { afterAll, describe, expect, it } from 'vitest';
import { exportGguf } from './export-gguf.js';
import { GgufTensorSource } from './gguf-tensor-source.js';
import { importGguf } from './import-gguf.js';

// The conformance checkpoints with transformers 4.47.1's logits (../../../../shared/conformance, next to the clone).
const SHARED = join(import.meta.dirname, '../../../../shared/conformance');
const MODELS = { 'llama-a': 'llama', 'llama-b': 'llama', 'phi3-a': 'families', 'olmo2-a': 'families', 'mixtral-a': 'families' } as const;
const have = existsSync(join(SHARED, 'llama/llama-a/golden.json'));
const root = mkdtempSync(join(tmpdir(), 'gguf-golden-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Golden {
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: ({ logits: number[] } | null)[][];
}

describe.skipIf(!have)('the conformance checkpoints through GGUF (export F32, import) against transformers 4.47.1', () => {
  it.each(Object.keys(MODELS) as (keyof typeof MODELS)[])('%s: prompt logits within 1e-4', async (model) => {
    const src = join(SHARED, MODELS[model], model);
    const dir = join(root, model);
    cpSync(join(src, 'f32'), dir, { recursive: true });
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    // The checkpoints carry no tokenizer; GGUF files must: any of the right size serves for logits.
    writeFamilyTokenizerFolder(dir, config.model_type === 'llama' ? 'llama3' : 'sentencepiece', { vocabSize: config.vocab_size });
    exportGguf({ folder: dir, out: join(root, `${model}.gguf`), type: 'F32' });
    const imported = importGguf(join(root, `${model}.gguf`), join(root, `data-${model}`));
    const g = JSON.parse(readFileSync(join(src, 'golden.json'), 'utf8')) as Golden;
    const engine = await Engine.fromSource(imported.description, new GgufTensorSource(imported.gguf), { backend: new ReferenceBackend() });
    try {
      const V = engine.description.vocabSize;
      const L = g.input_ids[0]!.length;
      const logits = await engine.forwardLogits(g.input_ids, g.attention_mask);
      let worst = 0;
      for (const [b, rows] of g.prompt_logits.entries()) {
        for (const [t, r] of rows.entries()) {
          for (const [v, want] of (r?.logits ?? []).entries()) worst = Math.max(worst, Math.abs(logits[(b * L + t) * V + v]! - want));
        }
      }
      expect(worst).toBeLessThan(1e-4);
    } finally {
      await engine.close();
    }
  });

  it('refuses Gemma 2 whose query_pre_attn_scalar llama.cpp would not use (gemma2-a: 16, head_dim 12)', () => {
    const dir = join(root, 'gemma2-a');
    cpSync(join(SHARED, 'families/gemma2-a/f32'), dir, { recursive: true });
    writeFamilyTokenizerFolder(dir, 'sentencepiece', { vocabSize: 1000 });
    expect(() => exportGguf({ folder: dir, out: join(root, 'gemma2-a.gguf'), type: 'F32' })).toThrow(/query_pre_attn_scalar 16 is not the 12 llama.cpp assumes for this Gemma 2/);
  });
});
