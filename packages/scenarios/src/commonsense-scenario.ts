import { pyStrip, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const COMMONSENSE_DATASETS = ['hellaswag', 'openbookqa', 'commonsenseqa', 'piqa', 'siqa'] as const;
export type CommonsenseDataset = (typeof COMMONSENSE_DATASETS)[number];

export const COMMONSENSE_URLS = {
  hellaswag: 'https://raw.githubusercontent.com/rowanz/hellaswag/master/data/',
  openbookqa: 'https://ai2-public-datasets.s3.amazonaws.com/open-book-qa/OpenBookQA-V1-Sep2018.zip',
  commonsenseqa: 'https://s3.amazonaws.com/commensenseqa/',
  piqa: 'https://yonatanbisk.com/piqa/data/',
  siqa: 'https://storage.googleapis.com/ai2-mosaic/public/socialiqa/socialiqa-train-dev.zip',
} as const;

/** One multiple-choice item: the question, its answers and the correct answer's text. */
export interface CommonsenseItem {
  question: string;
  answers: string[];
  correctAnswer: string;
}

const SPLITS: Readonly<Record<string, string>> = { train: TRAIN_SPLIT, val: VALID_SPLIT, test: TEST_SPLIT };

/**
 * HELM's `CommonSenseScenario`: HellaSwag, OpenBookQA, CommonsenseQA, PIQA and SIQA as multiple-choice instances
 * (every answer a reference, correct iff its text equals the labelled answer), train split first.
 */
export class CommonSenseScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.commonsense_scenario.CommonSenseScenario';
  readonly className = CommonSenseScenario.className;
  readonly name = 'commonsense';
  readonly description = 'Unified interface for all CommonSense scenarios.';
  readonly tags = ['knowledge', 'multiple_choice'];

  constructor(readonly dataset: string) {
    if (!(COMMONSENSE_DATASETS as readonly string[]).includes(dataset)) {
      throw new HelmError('AssertionError', `Unknown commonsense dataset "${dataset}"; use one of ${COMMONSENSE_DATASETS.join(', ')}.`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const items = await this.loadItems(context);
    return items.map(([item, split]) =>
      instance({
        input: { text: item.question },
        references: item.answers.map((answer) => reference(answer, answer === item.correctAnswer ? [CORRECT_TAG] : [])),
        split: SPLITS[split],
      }),
    );
  }

  private async loadItems(context: ScenarioContext): Promise<[CommonsenseItem, string][]> {
    const folder = join('data', this.dataset);
    const fetch = (url: string, file: string, unpack?: 'zip') => downloadSource(context, this.name, { url, path: join(folder, file), unpack });
    const out: [CommonsenseItem, string][] = [];
    const add = (split: string, rows: unknown[], where: string, process: (row: unknown, where: string) => CommonsenseItem) =>
      rows.forEach((row, i) => { out.push([process(row, `item ${i + 1} of ${where}`), split]); });

    switch (this.dataset as CommonsenseDataset) {
      case 'hellaswag':
        // The test split has no labels; HELM downloads it but never reads it.
        for (const split of ['train', 'val']) {
          const path = await fetch(`${COMMONSENSE_URLS.hellaswag}hellaswag_${split}.jsonl`, `hellaswag_${split}.jsonl`);
          add(split, await readJsonLines(path), path, hellaswagItem);
        }
        break;
      case 'openbookqa': {
        const root = await fetch(COMMONSENSE_URLS.openbookqa, 'OpenBookQA-V1-Sep2018', 'zip');
        for (const split of ['train', 'test']) {
          const path = join(root, 'Data', 'Main', `${split}.jsonl`);
          add(split, await readJsonLines(path), path, openbookqaItem);
        }
        break;
      }
      case 'commonsenseqa':
        for (const [split, file] of [
          ['train', 'train'],
          ['val', 'dev'],
        ] as const) {
          const path = await fetch(`${COMMONSENSE_URLS.commonsenseqa}${file}_rand_split.jsonl`, `commonsenseqa_${split}.jsonl`);
          add(split, await readJsonLines(path), path, commonsenseqaItem);
        }
        break;
      case 'piqa':
        for (const [split, file] of [
          ['train', 'train'],
          ['val', 'valid'],
        ] as const) {
          const raw = await fetch(`${COMMONSENSE_URLS.piqa}${file}.jsonl`, `piqa_${split}_raw.jsonl`);
          const labels = await fetch(`${COMMONSENSE_URLS.piqa}${file}-labels.lst`, `piqa_${split}_labels.lst`);
          add(split, withLabels(await readJsonLines(raw), await readLabels(labels), raw), raw, piqaItem);
        }
        break;
      case 'siqa': {
        const root = await fetch(COMMONSENSE_URLS.siqa, 'socialiqa-train-dev', 'zip');
        for (const [split, file] of [
          ['train', 'train'],
          ['val', 'dev'],
        ] as const) {
          const base = join(root, 'socialiqa-train-dev', file);
          add(split, withLabels(await readJsonLines(`${base}.jsonl`), await readLabels(`${base}-labels.lst`), `${base}.jsonl`), `${base}.jsonl`, siqaItem);
        }
        break;
      }
    }
    return out;
  }
}

/** `item[key]` as Python indexes a list: negative indexes count from the end; out of range is an IndexError. */
function pick(answers: readonly string[], index: unknown, where: string): string {
  if (typeof index !== 'number' || !Number.isInteger(index)) throw new HelmError('TypeError', `${where}: the label should be an int, got ${JSON.stringify(index)}.`);
  const i = index < 0 ? answers.length + index : index;
  if (i < 0 || i >= answers.length) throw new HelmError('Exception', `IndexError: ${where}: label ${index} is outside its ${answers.length} answers.`);
  return answers[i]!;
}

function strings(value: unknown, where: string): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw new HelmError('TypeError', `${where}: expected a list of strings.`);
  return value as string[];
}

function assertCount(answers: readonly string[], count: number, where: string): void {
  if (answers.length !== count) throw new HelmError('AssertionError', `${where}: expected ${count} answers, found ${answers.length}.`);
}

/** `"{activity_label}: {ctx_a} {ctx_b with its first character upper-cased}"`, four endings. */
export function hellaswagItem(row: unknown, where: string): CommonsenseItem {
  const ctxB = jsonString(row, 'ctx_b', where);
  const first = ctxB.length ? String.fromCodePoint(ctxB.codePointAt(0)!) : '';
  const fixed = first ? first.toUpperCase() + ctxB.slice(first.length) : '';
  const question = `${jsonString(row, 'activity_label', where)}: ${jsonString(row, 'ctx_a', where)} ${fixed}`;
  const answers = strings(jsonField(row, 'endings', where), where);
  const correctAnswer = pick(answers, jsonField(row, 'label', where), where);
  assertCount(answers, 4, where);
  return { question, answers, correctAnswer };
}

function lettered(row: unknown, where: string, letters: string, count: number): CommonsenseItem {
  const q = jsonField(row, 'question', where);
  const question = jsonString(q, 'stem', where);
  const choices = jsonField(q, 'choices', where);
  if (!Array.isArray(choices)) throw new HelmError('TypeError', `${where}: "choices" should be a list.`);
  const answers = choices.map((c) => jsonString(c, 'text', where));
  const key = jsonString(row, 'answerKey', where);
  const index = letters.indexOf(key);
  if (key.length !== 1 || index < 0) throw new HelmError('KeyError', `'${key}': ${where} has an answer key other than ${[...letters].join('/')}.`);
  const correctAnswer = pick(answers, index, where);
  assertCount(answers, count, where);
  if (jsonField(choices[index], 'label', where) !== key) throw new HelmError('AssertionError', `${where}: choice ${index} is not labelled ${key}.`);
  return { question, answers, correctAnswer };
}

export const openbookqaItem = (row: unknown, where: string): CommonsenseItem => lettered(row, where, 'ABCD', 4);
export const commonsenseqaItem = (row: unknown, where: string): CommonsenseItem => lettered(row, where, 'ABCDE', 5);

function keyCount(row: unknown, count: number, where: string): void {
  if (row === null || typeof row !== 'object' || Object.keys(row).length !== count) {
    throw new HelmError('AssertionError', `${where}: expected an object with ${count} fields (label included).`);
  }
}

export function piqaItem(row: unknown, where: string): CommonsenseItem {
  const answers = [jsonString(row, 'sol1', where), jsonString(row, 'sol2', where)];
  const label = jsonField(row, 'label', where);
  const correctAnswer = pick(answers, label, where);
  keyCount(row, 4, where);
  if (label !== 0 && label !== 1) throw new HelmError('AssertionError', `${where}: label ${String(label)} is not 0 or 1.`);
  return { question: jsonString(row, 'goal', where), answers, correctAnswer };
}

export function siqaItem(row: unknown, where: string): CommonsenseItem {
  const question = `${jsonString(row, 'context', where)} ${jsonString(row, 'question', where)}`;
  const answers = [jsonString(row, 'answerA', where), jsonString(row, 'answerB', where), jsonString(row, 'answerC', where)];
  const label = jsonField(row, 'label', where);
  if (typeof label !== 'number') throw new HelmError('TypeError', `${where}: the label should be an int.`);
  const correctAnswer = pick(answers, label - 1, where);
  keyCount(row, 6, where);
  if (![0, 1, 2].includes(label - 1)) throw new HelmError('AssertionError', `${where}: label ${label} is not 1, 2 or 3.`);
  return { question, answers, correctAnswer };
}

/** Python's `[int(line.strip()) for line in open(path)]`. */
async function readLabels(path: string): Promise<number[]> {
  return pythonLines(await readPythonText(path)).map((line, i) => {
    const text = pyStrip(line);
    if (!/^[+-]?\d+(_\d+)*$/.test(text)) throw new HelmError('ValueError', `invalid literal for int() with base 10: line ${i + 1} of ${path} is ${JSON.stringify(line)}.`);
    return Number(text.replaceAll('_', ''));
  });
}

/** HELM's `item["label"] = label` for paired data and label files of equal length. */
function withLabels(rows: unknown[], labels: number[], where: string): unknown[] {
  if (rows.length !== labels.length) throw new HelmError('AssertionError', `${where} has ${rows.length} items but its label file ${labels.length} labels.`);
  return rows.map((row, i) => {
    if (row === null || typeof row !== 'object' || Array.isArray(row)) throw new HelmError('TypeError', `item ${i + 1} of ${where} is not an object.`);
    return { ...row, label: labels[i] };
  });
}

export const commonsenseDefinition = defineScenario(CommonSenseScenario.className, { dataset: stringArg() }, (args) => new CommonSenseScenario(args.dataset));
