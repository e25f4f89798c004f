import { pyParseInt, pyStrip, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, passageQuestionInput, reference, type Instance } from '@flexhelm/core';
import { z } from 'zod';
import { joinInside } from './join-inside.js';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario } from './scenario-definition.js';

export const BABI_URL = 'http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz';

const DIRECTIONS: Readonly<Record<string, string>> = { s: 'south', n: 'north', e: 'east', w: 'west' };
const SPLITS: readonly (readonly [string, string])[] = [
  ['train', TRAIN_SPLIT],
  ['valid', VALID_SPLIT],
  ['test', TEST_SPLIT],
];

/**
 * HELM's `BabiQAScenario`: the 20 bAbI reasoning tasks (`en-valid` files). Statements accumulate into a story that
 * restarts at statement id 1; each question line becomes an instance asking about the story so far.
 */
export class BabiQAScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.babi_qa_scenario.BabiQAScenario';
  readonly className = BabiQAScenario.className;
  readonly name = 'babi_qa';
  readonly description = 'Question answering dataset with reasoning questions.';
  readonly tags = ['question_answering'];
  readonly tasks: number[];

  constructor(task: string | number) {
    if (task === 'all') {
      this.tasks = Array.from({ length: 20 }, (_, i) => i + 1);
      return;
    }
    const n = typeof task === 'number' ? task : pyParseInt(task);
    if (n === undefined || !Number.isInteger(n)) throw new HelmError('ValueError', `invalid literal for int() with base 10: ${JSON.stringify(task)}; babi_qa task is "all" or 1–20.`);
    if (n < 1 || n > 20) throw new HelmError('AssertionError', `babi_qa task ${n} does not exist; use "all" or 1–20.`);
    this.tasks = [n];
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const root = await downloadSource(context, this.name, { url: BABI_URL, path: join('data', 'tasks_1-20_v1-2'), unpack: 'tar.gz' });
    const instances: Instance[] = [];
    for (const task of this.tasks) {
      for (const [file, split] of SPLITS) {
        const path = joinInside(root, 'en-valid', `qa${task}_${file}.txt`);
        instances.push(...babiInstances(pythonLines(await readPythonText(path)), task, split, path));
      }
    }
    return instances;
  }
}

/** The instances of one bAbI file. */
export function babiInstances(lines: readonly string[], task: number, split: string, where = 'the bAbI file'): Instance[] {
  const instances: Instance[] = [];
  let story: string[] = [];
  lines.forEach((line, i) => {
    const words = line.split(' ');
    const id = pyParseInt(words[0]!); // split gives at least one word
    if (id === undefined) throw new HelmError('ValueError', `line ${i + 1} of ${where} does not start with a statement number.`);
    if (id === 1) story = [];
    const fact = words.slice(1).join(' ');
    if (!fact.includes('?')) {
      story.push(fact);
      return;
    }
    const parts = fact.split('\t');
    if (parts.length < 2) throw new HelmError('ValueError', `line ${i + 1} of ${where} is a question without a tab-separated answer.`);
    const question = pyStrip(parts[0]!);
    let answer = pyStrip(parts[1]!);
    if (task === 19) answer = babiPath(answer);
    instances.push(
      instance({
        input: passageQuestionInput(story.join(''), question, { separator: '' }),
        references: [reference(answer, [CORRECT_TAG])],
        split,
      }),
    );
  });
  return instances;
}

/** Task 19's path answers: `s,w` → `south west`. */
export function babiPath(path: string): string {
  return path
    .split(',')
    .map((step) => {
      if (!Object.hasOwn(DIRECTIONS, step)) throw new HelmError('KeyError', `'${step}': a task 19 path step must be one of n, s, e, w.`);
      return DIRECTIONS[step];
    })
    .join(' ');
}

export const babiQaDefinition = defineScenario(
  BabiQAScenario.className,
  { task: z.union([z.string(), z.number().int()], { error: 'must be "all" or a task number 1–20' }) },
  (args) => new BabiQAScenario(args.task),
);
