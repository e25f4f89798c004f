import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario } from './scenario-definition.js';

export const LEGAL_SUPPORT_URL = 'https://docs.google.com/uc?export=download&id=1PVoyddrCHChMxYrLhsI-zu7Xzs5S8N77';

/**
 * HELM's `LegalSupportScenario`: which of two citations' parentheticals best supports a legal passage
 * (`legal_support/{train,dev,test}.jsonl`); the labelled one (`a` or `b`) is correct.
 */
export class LegalSupportScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.legal_support_scenario.LegalSupportScenario';
  readonly className = LegalSupportScenario.className;
  readonly name = 'legal_support';
  readonly description = 'Binary multiple choice question dataset for legal argumentative reasoning.';
  readonly tags = ['question_answering', 'law'];

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: LEGAL_SUPPORT_URL, path: 'data', unpack: 'zip' });
    const instances: Instance[] = [];
    for (const [file, split] of [
      ['train', TRAIN_SPLIT],
      ['dev', VALID_SPLIT],
      ['test', TEST_SPLIT],
    ]) {
      const path = join(dataPath, 'legal_support', `${file}.jsonl`);
      (await readJsonLines(path)).forEach((row, i) => {
        const where = `line ${i + 1} of ${path}`;
        const answers = [jsonString(jsonField(row, 'citation_a', where), 'parenthetical', where), jsonString(jsonField(row, 'citation_b', where), 'parenthetical', where)];
        const label = jsonField(row, 'label', where);
        const index = label === 'a' ? 0 : label === 'b' ? 1 : -1;
        if (index < 0) throw new HelmError('KeyError', `${JSON.stringify(label)}: ${where} has a label other than "a" or "b".`);
        const correct = answers[index];
        instances.push(
          instance({
            input: { text: jsonString(row, 'context', where) },
            references: answers.map((a) => reference(a, a === correct ? [CORRECT_TAG] : [])),
            split,
          }),
        );
      });
    }
    return instances;
  }
}

export const legalSupportDefinition = defineScenario(LegalSupportScenario.className, {}, () => new LegalSupportScenario());
