import { readPythonText } from '@flexhelm/python-compat';
import { CORRECT_TAG, HelmError, TEST_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';

export const SYNTHETIC_EFFICIENCY_URL = 'https://worksheets.codalab.org/rest/bundles/0x17a361bc066b4b0e87d968069759d361/contents/blob/';

/** The tokenizers HELM 0.2.1 has prompt files for. */
export const SYNTHETIC_EFFICIENCY_TOKENIZERS: readonly string[] = [
  'huggingface/gpt2',
  'ai21/j1',
  'cohere/cohere',
  'meta/opt',
  'yandex/yalm',
  'bigscience/bloom',
  'bigscience/t0pp',
  'google/t5',
  'google/ul2',
  'tsinghua/glm',
  'eleutherai/gptj',
  'eleutherai/gptneox',
];

/** The prompt lengths HELM generated files for (`NUM_INPUT_TOKENS`). */
export const SYNTHETIC_EFFICIENCY_PROMPT_TOKENS: readonly number[] = [1, 16, 32, 64, 256, 512, 768, 1024, 1536, 1920];

/** The prompt file of one instance: its name encodes the length, the tokenizer (with `/` → `_`) and the index. */
export function syntheticEfficiencyFileName(numPromptTokens: number, tokenizer: string, id: number): string {
  return `num_prompt_tokens=${numPromptTokens},tokenizer=${tokenizer.replaceAll('/', '_')},id=${id}.txt`;
}

/**
 * HELM's `SyntheticEfficiencyScenario`: `numInstances` fixed public-domain prompts of exactly `numPromptTokens` tokens
 * under `tokenizer`, one file each, as test instances with an empty correct reference (for runtime benchmarking).
 */
export class SyntheticEfficiencyScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.synthetic_efficiency_scenario.SyntheticEfficiencyScenario';
  readonly className = SyntheticEfficiencyScenario.className;
  readonly name = 'synthetic_efficiency';
  readonly description = 'Synthetic scenario for benchmarking efficiency metrics';
  readonly tags: string[] = [];

  constructor(
    readonly numPromptTokens: number,
    readonly numInstances: number,
    readonly tokenizer: string,
  ) {}

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    // HELM checks the tokenizer only when reading, not in the constructor.
    if (!SYNTHETIC_EFFICIENCY_TOKENIZERS.includes(this.tokenizer)) {
      throw new HelmError(
        'AssertionError',
        `synthetic_efficiency has no prompts for tokenizer ${JSON.stringify(this.tokenizer)}; use one of ${SYNTHETIC_EFFICIENCY_TOKENIZERS.join(', ')}.`,
      );
    }
    const instances: Instance[] = [];
    for (let id = 0; id < this.numInstances; id++) {
      const fileName = syntheticEfficiencyFileName(this.numPromptTokens, this.tokenizer, id);
      const path = await downloadSource(context, this.name, { url: `${SYNTHETIC_EFFICIENCY_URL}${fileName}`, path: fileName });
      instances.push(instance({ input: { text: await readPythonText(path) }, references: [reference('', [CORRECT_TAG])], split: TEST_SPLIT }));
    }
    return instances;
  }
}

export const syntheticEfficiencyDefinition = defineScenario(
  SyntheticEfficiencyScenario.className,
  { num_prompt_tokens: intArg(), num_instances: intArg(), tokenizer: stringArg() },
  (args) => new SyntheticEfficiencyScenario(args.num_prompt_tokens, args.num_instances, args.tokenizer),
);
