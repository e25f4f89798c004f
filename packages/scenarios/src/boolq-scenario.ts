import { pyCapitalize, pyStrip } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TRAIN_SPLIT, VALID_SPLIT, instance, passageQuestionInput, reference, type Input, type Instance, type Reference } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonFile, readJsonLines } from './json-lines.js';
import { pyTruthy } from '@flexhelm/python-compat';
import type { Scenario, ScenarioContext } from './scenario.js';
import { boolArg, defineScenario } from './scenario-definition.js';

export const BOOLQ_URL = 'https://storage.googleapis.com/boolq/';
export const BOOLQ_CONTRAST_URL = 'https://raw.githubusercontent.com/allenai/contrast-sets/main/BoolQ/boolq_perturbed.json';

interface ContrastEntry {
  originalAnswer: string;
  questions: string[];
  answers: string[];
}

/**
 * HELM's `BoolQScenario`: yes/no questions about a passage (train and dev → train and valid). Dev questions that have
 * answer-flipping perturbations in AllenAI's contrast sets get them as contrast inputs; with `onlyContrast`, dev
 * questions without any are dropped.
 */
export class BoolQScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.boolq_scenario.BoolQScenario';
  readonly className = BoolQScenario.className;
  readonly name = 'boolq';
  readonly description = 'Question answering dataset with naturally occurring Yes/No questions.';
  readonly tags = ['question_answering'];

  constructor(readonly onlyContrast = false) {}

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const splits: [string, string][] = [
      [TRAIN_SPLIT, 'train'],
      [VALID_SPLIT, 'dev'],
    ];
    const paths = new Map<string, string>();
    for (const [split, file] of splits) {
      paths.set(split, await downloadSource(context, this.name, { url: `${BOOLQ_URL}${file}.jsonl`, path: join('data', file) }));
    }
    const contrastPath = await downloadSource(context, this.name, { url: BOOLQ_CONTRAST_URL, path: join('data', 'boolq_perturbed.jsonl') });
    const contrastMap = boolqContrastMap(await readJsonFile(contrastPath), contrastPath);
    const instances: Instance[] = [];
    for (const [split] of splits) {
      const path = paths.get(split)!;
      const rows = await readJsonLines(path);
      instances.push(...this.splitInstances(split, rows, split === VALID_SPLIT ? contrastMap : new Map(), path));
    }
    return instances;
  }

  splitInstances(split: string, rows: readonly unknown[], contrastMap: ReadonlyMap<string, ContrastEntry>, path: string): Instance[] {
    const instances: Instance[] = [];
    rows.forEach((row, i) => {
      const where = `line ${i + 1} of ${path}`;
      const passage = jsonString(row, 'passage', where);
      const question = jsonString(row, 'question', where);
      const correctAnswer = pyTruthy(jsonField(row, 'answer', where)) ? 'Yes' : 'No';
      const input = boolqInput(passage, question);
      let contrastInputs: Input[] | undefined;
      let contrastReferences: Reference[][] | undefined;
      const contrast = contrastMap.get(question);
      if (contrast) {
        if (correctAnswer !== contrast.originalAnswer) {
          throw new HelmError('AssertionError', `${where}: the contrast set gives "${question}" the answer ${contrast.originalAnswer}, BoolQ ${correctAnswer}.`);
        }
        contrastInputs = contrast.questions.map((q) => boolqInput(passage, q));
        contrastReferences = contrast.answers.map((a) => [reference(a, [CORRECT_TAG])]);
      } else if (this.onlyContrast && split === VALID_SPLIT) {
        return;
      }
      instances.push(
        instance({ input, references: [reference(correctAnswer, [CORRECT_TAG])], split, contrast_inputs: contrastInputs, contrast_references: contrastReferences }),
      );
    });
    return instances;
  }
}

/** HELM's `get_context`: the question stripped, capitalised and given a `?`, after the passage. */
export function boolqInput(passage: string, question: string): Input {
  const q = pyCapitalize(pyStrip(question));
  if (q === '') throw new HelmError('Exception', 'IndexError: a BoolQ question is empty.');
  if (q.endsWith('?')) throw new HelmError('AssertionError', `BoolQ question already ends with "?": ${q}`);
  return passageQuestionInput(passage, `${q}?`);
}

/** The contrast map: original question → its answer and the perturbed questions whose answer differs. */
export function boolqContrastMap(contrastJson: unknown, path: string): Map<string, ContrastEntry> {
  const data = jsonField(contrastJson, 'data', path);
  if (!Array.isArray(data)) throw new HelmError('TypeError', `${path}: "data" should be a list.`);
  const map = new Map<string, ContrastEntry>();
  data.slice(1).forEach((item, i) => {
    const where = `item ${i + 1} of ${path}`;
    const question = jsonString(item, 'question', where);
    const originalAnswer = jsonField(item, 'answer', where) === 'TRUE' ? 'Yes' : 'No';
    if (map.has(question)) throw new HelmError('AssertionError', `${where}: question "${question}" appears twice in the contrast set.`);
    const entry: ContrastEntry = { originalAnswer, questions: [], answers: [] };
    const perturbed = jsonField(item, 'perturbed_questions', where);
    if (!Array.isArray(perturbed)) throw new HelmError('TypeError', `${where}: "perturbed_questions" should be a list.`);
    for (const p of perturbed) {
      const perturbedQuestion = jsonField(p, 'perturbed_q', where);
      const perturbedAnswer = jsonField(p, 'answer', where) === 'TRUE' ? 'Yes' : 'No';
      if (!pyTruthy(perturbedQuestion) || perturbedAnswer === originalAnswer) continue;
      if (typeof perturbedQuestion !== 'string') throw new HelmError('TypeError', `${where}: "perturbed_q" should be a string.`);
      entry.questions.push(perturbedQuestion);
      entry.answers.push(perturbedAnswer);
    }
    if (entry.questions.length > 0) map.set(question, entry);
  });
  return map;
}

export const boolqDefinition = defineScenario(BoolQScenario.className, { only_contrast: boolArg().default(false) }, (args) => new BoolQScenario(args.only_contrast));
