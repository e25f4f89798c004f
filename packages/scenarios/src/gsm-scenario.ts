import { CORRECT_TAG, TEST_SPLIT, TRAIN_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonString, readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario } from './scenario-definition.js';

// HELM joins this and "/{split}.jsonl", so its URLs have a double slash; kept as is.
export const GSM_BASE_URL = 'https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/';

/**
 * HELM's `GSM8KScenario`: grade-school math word problems (train, test); the reference is the worked solution with
 * `####` turned into `The answer is`, newlines into spaces, and a final `.`.
 */
export class GSM8KScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.gsm_scenario.GSM8KScenario';
  readonly className = GSM8KScenario.className;
  readonly name = 'gsm';
  readonly description = 'Grade school math dataset with 8.5K examples (GSM8K).';
  readonly tags = ['reasoning', 'math'];

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const instances: Instance[] = [];
    for (const [split, tag] of [
      ['train', TRAIN_SPLIT],
      ['test', TEST_SPLIT],
    ]) {
      const path = await downloadSource(context, this.name, { url: `${GSM_BASE_URL}/${split}.jsonl`, path: `gsm_data_${split}` });
      (await readJsonLines(path)).forEach((example, i) => {
        const where = `line ${i + 1} of ${path}`;
        instances.push(
          instance({
            input: { text: jsonString(example, 'question', where) },
            references: [reference(gsmAnswer(jsonString(example, 'answer', where)), [CORRECT_TAG])],
            split: tag,
          }),
        );
      });
    }
    return instances;
  }
}

/** The reference text HELM makes from a GSM8K solution. */
export function gsmAnswer(answer: string): string {
  return `${answer.replaceAll('####', 'The answer is').replaceAll('\n', ' ')}.`;
}

export const gsmDefinition = defineScenario(GSM8KScenario.className, {}, () => new GSM8KScenario());
