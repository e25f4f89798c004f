import { parsePythonCsv, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { existsSync } from 'node:fs';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { joinInside, realPathInside } from './join-inside.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const MMLU_DATA_URL = 'https://people.eecs.berkeley.edu/~hendrycks/data.tar';

/** MMLU's file splits, in the order HELM reads them, and the HELM split each becomes. */
const MMLU_SPLITS: readonly (readonly [string, string])[] = [
  ['auxiliary_train', TRAIN_SPLIT],
  ['dev', TRAIN_SPLIT],
  ['val', VALID_SPLIT],
  ['test', TEST_SPLIT],
];

const ANSWER_LETTERS = ['A', 'B', 'C', 'D', 'E'];

/**
 * HELM's `MMLUScenario` (Hendrycks et al. 2021): one subject's multiple-choice questions from `data.tar`, read from
 * `data/{split}/{subject}_{split}.csv` rows `[question, answer…, letter]`; a missing split file is skipped.
 */
export class MMLUScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.mmlu_scenario.MMLUScenario';
  readonly className = MMLUScenario.className;
  readonly name = 'mmlu';
  readonly description = 'Massive Multitask Language Understanding';
  readonly tags = ['knowledge', 'multiple_choice'];

  constructor(readonly subject: string) {}

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: MMLU_DATA_URL, path: 'data', unpack: 'tar' });
    const instances: Instance[] = [];
    for (const [fileSplit, split] of MMLU_SPLITS) {
      // The subject comes from the description: the file it names must be inside the data folder.
      const csvPath = joinInside(dataPath, fileSplit, `${this.subject}_${fileSplit}.csv`);
      if (!existsSync(csvPath)) {
        context.log?.(`${csvPath} doesn't exist, skipping`);
        continue;
      }
      context.log?.(`Reading ${csvPath}`);
      await realPathInside(dataPath, csvPath);
      instances.push(...mmluInstances(pythonLines(await readPythonText(csvPath)), split, csvPath));
    }
    return instances;
  }
}

/** The instances of one MMLU csv file: every answer is a reference, correct iff its text is the lettered answer's. */
export function mmluInstances(lines: readonly string[], split: string, source = 'the csv file'): Instance[] {
  return parsePythonCsv(lines).map((row, i) => {
    if (row.length < 2) {
      throw new HelmError('Exception', `IndexError: row ${i + 1} of ${source} has ${row.length} field(s); MMLU rows are question, answers…, letter.`);
    }
    const question = row[0]!;
    const answers = row.slice(1, -1);
    const letter = row[row.length - 1]!;
    const letterIndex = ANSWER_LETTERS.indexOf(letter);
    if (letterIndex < 0 || letterIndex >= answers.length) {
      throw new HelmError('KeyError', `'${letter}': row ${i + 1} of ${source} names an answer letter it does not have (answers: ${answers.length}).`);
    }
    const correct = answers[letterIndex];
    return instance({
      input: { text: question },
      references: answers.map((answer) => reference(answer, answer === correct ? [CORRECT_TAG] : [])),
      split,
    });
  });
}

export const mmluDefinition = defineScenario(MMLUScenario.className, { subject: stringArg() }, (args) => new MMLUScenario(args.subject));
