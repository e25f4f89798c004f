import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readGguf } from '@flexhelm/gguf';
import { RUN_OUTPUT_FILES } from '@flexhelm/runner';
import { describe, expect, it } from 'vitest';
import { familyRunTests, flexhelm, scenario, serveAnswers } from './test-family-runs.js';

// flexhelm run and serve on the default path (test-family-runs.ts): Qwen2 and the mixtures of experts.
describe('flexhelm run on the default path: Qwen2, Mixtral, Qwen2-MoE', () => {
  const { root, dataDir } = familyRunTests(['qwen2', 'mixtral', 'qwen2_moe']);

  it('a Mixtral exported as a Q4_0 GGUF file (llama with experts): run writes the five files and serve answers; a Qwen2-MoE with dense layers is refused in one line', async () => {
    const file = join(root, 'gguf', 'mixtral-q4_0.gguf');
    const e = flexhelm(['export-gguf', '--model', join(root, 'mixtral'), '--out', file, '--type', 'Q4_0']);
    expect(e.status, e.stderr).toBe(0);
    const f = readGguf(file);
    expect([f.metadata.get('general.architecture'), f.metadata.get('llama.expert_count')]).toEqual(['llama', 4]);
    expect(f.tensors.find((t) => t.name === 'blk.1.ffn_down_exps.weight')).toMatchObject({ dims: [96, 64, 4], type: 'Q4_0' });
    const out = join(root, 'out-mixtral-gguf');
    const r = flexhelm(['run', '-d', scenario, '--max-eval-instances', '4', '-t', '1', '--model', file, '--output-path', out, '--data-dir', dataDir, '--offline']);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/reading .*mixtral-q4_0\.gguf \(llama, \d+ tensors\): its config and tokenizer to .*; the weights are read from the file/);
    const runs = join(out, 'runs', 'v1');
    expect(readdirSync(join(runs, readdirSync(runs).find((d) => d.startsWith(scenario))!)).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
    await serveAnswers(file, { dataDir, outputPath: join(root, 'serve-mixtral-gguf'), servedName: 'mixtral-q4' });
    const refused = flexhelm(['export-gguf', '--model', join(root, 'qwen2_moe'), '--out', join(root, 'gguf', 'qwen2moe.gguf'), '--type', 'Q8_0']);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/^flexhelm export-gguf: llama\.cpp's qwen2moe has experts on every layer; this model has them on 1 of 2 \(decoder_sparse_step 2, mlp_only_layers \[\]\)\n/);
    expect(refused.stderr).not.toMatch(/\n\s+at /);
  }, 600_000);
});
