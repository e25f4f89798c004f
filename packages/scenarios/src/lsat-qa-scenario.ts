import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, passageQuestionInput, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonFile } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const LSAT_BASE_URL = 'https://raw.githubusercontent.com/zhongwanjun/AR-LSAT/main/data/';

const QUESTION_TYPES: Readonly<Record<string, readonly string[]>> = {
  grouping: ['in/out grouping', 'distribution grouping'],
  ordering: ['simple ordering', 'relative ordering', 'complex ordering'],
  assignment: ['determined assignment', 'undetermined assignment'],
  miscellaneous: [],
};
const SUBTYPE_TO_TYPE = new Map(Object.entries(QUESTION_TYPES).flatMap(([type, subtypes]) => subtypes.map((s) => [s, type] as const)));
const SPLITS: readonly (readonly [string, string])[] = [
  ['Training', TRAIN_SPLIT],
  ['Development', VALID_SPLIT],
  ['Test', TEST_SPLIT],
];

/**
 * HELM's `LSATScenario`: AR-LSAT analytical-reasoning questions, optionally only one question type (`grouping`,
 * `ordering`, `assignment` or `miscellaneous`); options are the references, the lettered answer correct.
 */
export class LSATScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.lsat_qa_scenario.LSATScenario';
  readonly className = LSATScenario.className;
  readonly name = 'lsat_qa';
  readonly description = 'Question answering dataset with questions from LSAT exams.';
  readonly tags = ['question_answering'];

  constructor(readonly task: string) {
    if (task !== 'all' && !Object.hasOwn(QUESTION_TYPES, task)) {
      throw new HelmError('AssertionError', `Invalid task: ${task}. Use all, ${Object.keys(QUESTION_TYPES).join(', ')}.`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const instances: Instance[] = [];
    for (const [file, split] of SPLITS) {
      const name = `AR_${file}Data.json`;
      const path = await downloadSource(context, this.name, { url: LSAT_BASE_URL + name, path: join('data', name) });
      const data = await readJsonFile(path);
      if (!Array.isArray(data)) throw new HelmError('TypeError', `${path} should hold a list of passages.`);
      data.forEach((p, i) => {
        const where = `passage ${i + 1} of ${path}`;
        const passage = jsonString(p, 'passage', where);
        const questions = jsonField(p, 'questions', where);
        if (!Array.isArray(questions)) throw new HelmError('TypeError', `${where}: "questions" should be a list.`);
        for (const q of questions) {
          const tags = jsonField(q, 'tags', where);
          if (!Array.isArray(tags) || tags.length < 3 || typeof tags[2] !== 'string') {
            throw new HelmError('Exception', `IndexError: ${where}: a question's "tags" needs a third (type) entry.`);
          }
          if (this.task !== 'all' && !lsatQuestionTypes(tags[2]).includes(this.task)) continue;
          const options = jsonField(q, 'options', where);
          if (!Array.isArray(options) || !options.every((o) => typeof o === 'string')) throw new HelmError('TypeError', `${where}: "options" should be a list of strings.`);
          const answer = jsonString(q, 'answer', where);
          if ([...answer].length !== 1) throw new HelmError('TypeError', `ord() expected a character: ${where} has answer ${JSON.stringify(answer)}.`);
          const correct = answer.codePointAt(0)! - 'A'.codePointAt(0)!;
          instances.push(
            instance({
              input: passageQuestionInput(passage, jsonString(q, 'question', where)),
              references: (options as string[]).map((option, index) => reference(option, index === correct ? [CORRECT_TAG] : [])),
              split,
            }),
          );
        }
      });
    }
    return instances;
  }
}

/** HELM's `get_question_types(tags)` from the type tag: `[subtype_with_underscores, its type or None]`. */
export function lsatQuestionTypes(typeTag: string): (string | undefined)[] {
  const questionType = typeTag.replaceAll('grouping (distribution)', 'distribution grouping') || 'miscellaneous';
  return [questionType.replaceAll(' ', '_').replaceAll('/', '_'), SUBTYPE_TO_TYPE.get(questionType)];
}

export const lsatQaDefinition = defineScenario(LSATScenario.className, { task: stringArg() }, (args) => new LSATScenario(args.task));
