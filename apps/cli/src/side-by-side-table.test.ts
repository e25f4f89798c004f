import { describe, expect, it } from 'vitest';
import { sideBySideTables } from './side-by-side-table.js';

const row = (name: string, split: string, mean: number) => ({ name, split, perturbation: '', mean, count: 1 });

describe('sideBySideTables', () => {
  it('puts the runs of one description for several models in one table, a column per model', () => {
    const tables = sideBySideTables([
      { run: 'synthetic_reasoning:mode=pattern_match,model=local_qwen2', model: 'local/qwen2', metrics: [row('exact_match', 'test', 0.25), row('num_output_tokens', 'test', 50)] },
      { run: 'synthetic_reasoning:mode=pattern_match,model=local_opt', model: 'local/opt', metrics: [row('exact_match', 'test', 0), row('logprob', 'test', -118.897)] },
      { run: 'mmlu:subject=philosophy,model=local_opt,data_augmentation=canonical', model: 'local/opt', metrics: [row('exact_match', 'test', 1)] },
    ]);
    expect(tables).toBe(
      [
        '## synthetic_reasoning:mode=pattern_match: models side by side',
        '',
        '| metric | split | perturbation | `local/qwen2` | `local/opt` |',
        '| --- | --- | --- | --- | --- |',
        '| exact_match | test |  | 0.2500 | 0 |',
        '| num_output_tokens | test |  | 50 |  |',
        '| logprob | test |  |  | -118.8970 |',
        '',
      ].join('\n'),
    );
  });

  it('is empty when every description ran for one model', () => {
    expect(sideBySideTables([{ run: 'a:model=x', model: 'x', metrics: [row('exact_match', 'test', 1)] }])).toBe('');
  });
});
