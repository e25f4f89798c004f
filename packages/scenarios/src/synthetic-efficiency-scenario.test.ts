import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { SYNTHETIC_EFFICIENCY_URL, SyntheticEfficiencyScenario, syntheticEfficiencyFileName } from './synthetic-efficiency-scenario.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('SyntheticEfficiencyScenario', () => {
  it('names prompt files by length, tokenizer and index as HELM', () => {
    expect(syntheticEfficiencyFileName(256, 'huggingface/gpt2', 3)).toBe('num_prompt_tokens=256,tokenizer=huggingface_gpt2,id=3.txt');
  });

  it('reads one prompt file per instance (text mode: \\r\\n → \\n) as test instances with an empty correct reference', async () => {
    fixture = await sourceFixture({
      [`${SYNTHETIC_EFFICIENCY_URL}num_prompt_tokens=16,tokenizer=meta_opt,id=0.txt`]: 'The quick brown fox\r\njumps.',
      [`${SYNTHETIC_EFFICIENCY_URL}num_prompt_tokens=16,tokenizer=meta_opt,id=1.txt`]: ' over the lazy dog\n',
      [`${SYNTHETIC_EFFICIENCY_URL}num_prompt_tokens=16,tokenizer=meta_opt,id=2.txt`]: 'never read',
    });
    const spec = objectSpec(SyntheticEfficiencyScenario.className, { num_prompt_tokens: 16, num_instances: 2, tokenizer: 'meta/opt' });
    const instances = await createScenario(spec).getInstances(fixture.context);
    expect(JSON.parse(JSON.stringify(instances))).toEqual([
      { input: { text: 'The quick brown fox\njumps.' }, references: [{ output: { text: '' }, tags: ['correct'] }], split: 'test' },
      { input: { text: ' over the lazy dog\n' }, references: [{ output: { text: '' }, tags: ['correct'] }], split: 'test' },
    ]);
  });

  it('refuses a tokenizer HELM has no prompts for', async () => {
    await expect(new SyntheticEfficiencyScenario(16, 1, 'openai/cl100k').getInstances({ outputPath: '/nonexistent' })).rejects.toThrow(/no prompts for tokenizer "openai\/cl100k"/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError(
      (context) => new SyntheticEfficiencyScenario(1, 1, 'huggingface/gpt2').getInstances(context),
      `${SYNTHETIC_EFFICIENCY_URL}num_prompt_tokens=1,tokenizer=huggingface_gpt2,id=0.txt`,
    );
  });
});
