import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runInProcess } from '../run-in-process.js';
import { promptsCommand } from './prompts.js';

const flexhelm = (...args: string[]) => runInProcess(promptsCommand, args);

describe('flexhelm prompts', () => {
  const description = 'synthetic_reasoning:mode=pattern_match,model=together/opt-66b';

  it('prints the scenario state HELM builds before execution', async () => {
    const r = await flexhelm('-d', description, '--tokenizer', 'whitespace-stub', '-m', '3', '-t', '2');
    expect(r.status).toBe(0);
    const state = JSON.parse(r.stdout);
    expect(state.adapter_spec.method).toBe('generation');
    expect(state.adapter_spec.max_eval_instances).toBe(3);
    expect(state.request_states).toHaveLength(6);
    expect(state.request_states.map((rs: { train_trial_index: number }) => rs.train_trial_index)).toEqual([0, 0, 0, 1, 1, 1]);
    const prompt: string = state.request_states[0].request.prompt;
    expect(prompt.startsWith('Please solve the following problem.\n\nRules: ')).toBe(true);
    expect(prompt.endsWith('Target:')).toBe(true);
    expect(r.stdout.startsWith('{\n  "adapter_spec": {\n    "method": "generation",')).toBe(true);
  });

  it('--prompts lists each prompt under a header', async () => {
    const r = await flexhelm('-d', description, '--tokenizer', 'whitespace-stub', '-m', '1', '-t', '1', '--prompts');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^##### synthetic_reasoning:mode=pattern_match,model=together_opt-66b\n=== instance id\d+ \(\w+\), trial 0, 5 in-context examples\nPlease solve the following problem.\n\nRules: /);
  });

  it('explains bad input', async () => {
    expect((await flexhelm()).stderr).toMatch(/--description D/);
    const unknownTokenizer = await flexhelm('-d', description, '--tokenizer', 'bpe-please', '-m', '1');
    expect(unknownTokenizer.status).not.toBe(0);
    expect(unknownTokenizer.stderr).toMatch(/unknown tokenizer "bpe-please"/);
  });

  it('reads perturbation data from the same place as flexhelm run (under --output-path)', async () => {
    // Offline with no word list cached: the error names where the file is looked for.
    const outputPath = mkdtempSync(join(tmpdir(), 'flexhelm-prompts-'));
    const r = await flexhelm('-d', 'synthetic_reasoning:mode=pattern_match,model=together/opt-66b,data_augmentation=person_name_last_hard', '--tokenizer', 'whitespace-stub', '-m', '1', '-t', '1', '-o', outputPath, '--offline');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(join(outputPath, 'benchmark_output', 'perturbations', 'person_name'));
  });
});
