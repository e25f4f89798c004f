import { PythonRandom } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, DEFAULT_TEST_SIZE, HelmError, TEST_SPLIT, TRAIN_SPLIT, instance, passageQuestionInput, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const BBQ_BASE_URL = 'https://raw.githubusercontent.com/nyu-mll/BBQ/main/data/';
export const BBQ_CATEGORIES = [
  'Age',
  'Disability_status',
  'Gender_identity',
  'Nationality',
  'Physical_appearance',
  'Race_ethnicity',
  'Race_x_SES',
  'Race_x_gender',
  'Religion',
  'SES',
  'Sexual_orientation',
];
const LETTERS = ['A', 'B', 'C'] as const;
const UNKNOWN_RESPONSES = [
  'Cannot answer',
  "Can't be determined",
  'Cannot be determined',
  "Can't answer",
  'Not known',
  'Not enough info',
  'Not enough information',
  'Not answerable',
  'Undetermined',
  'Unknown',
];

/** Python's `needle in container` for a JSON value: list membership, or substring for a string. */
function pyIn(needle: string, container: unknown): boolean {
  if (typeof container === 'string') return container.includes(needle);
  if (Array.isArray(container)) return container.includes(needle);
  throw new HelmError('TypeError', `argument of type '${typeof container}' is not iterable`);
}

/** Python's iteration over a JSON value: list items, or the characters of a string. */
function pyItems(container: unknown): unknown[] {
  if (typeof container === 'string') return [...container];
  if (Array.isArray(container)) return container;
  throw new HelmError('TypeError', `'${typeof container}' object is not iterable`);
}

/**
 * HELM's `BBQScenario`: the Bias Benchmark for QA. All lines of the chosen categories are shuffled with
 * `random.seed(0)`; the last 1000 are test, the rest train. References carry HELM's tags: correct, polarity,
 * ambiguity, the label letter and the letters of the target, non-target and unknown answers.
 */
export class BBQScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.bbq_scenario.BBQScenario';
  readonly className = BBQScenario.className;
  readonly name = 'bbq';
  readonly description = 'Bias analysis of LM question-answering.';
  readonly tags = ['harms', 'bias'];

  constructor(readonly subject = 'all') {}

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const categories = this.subject === 'all' ? BBQ_CATEGORIES : [this.subject];
    const lines: [unknown, string, string][] = [];
    for (const category of categories) {
      const path = await downloadSource(context, this.name, { url: `${BBQ_BASE_URL}${category}.jsonl`, path: join('data', category) });
      (await readJsonLines(path)).forEach((line, i) => { lines.push([line, category, `line ${i + 1} of ${path}`]); });
    }
    new PythonRandom(0).shuffle(lines);
    const trainSize = lines.length - DEFAULT_TEST_SIZE;
    return lines.map(([line, category, where], idx) => bbqInstance(line, category, idx < trainSize ? TRAIN_SPLIT : TEST_SPLIT, where));
  }
}

/** One BBQ line as HELM turns it into an instance. */
export function bbqInstance(line: unknown, category: string, split: string, where = 'a BBQ line'): Instance {
  const isNegative = jsonField(line, 'question_polarity', where) === 'neg';
  const isAmbiguous = jsonField(line, 'context_condition', where) === 'ambig';
  const context = jsonString(line, 'context', where);
  const question = jsonString(line, 'question', where);
  const answers = [jsonString(line, 'ans0', where), jsonString(line, 'ans1', where), jsonString(line, 'ans2', where)];
  const label = jsonField(line, 'label', where);
  if (label !== 0 && label !== 1 && label !== 2) throw new HelmError('KeyError', `${String(label)}: ${where} has a label other than 0, 1, 2.`);
  const answerInfo = jsonField(line, 'answer_info', where);
  const stereotypedGroups = pyItems(jsonField(jsonField(line, 'additional_metadata', where), 'stereotyped_groups', where));

  let unknownLetter = '';
  let targetLetter = '';
  let nonTargetLetter = '';
  answers.forEach((_, i) => {
    const info = jsonField(answerInfo, `ans${i}`, where);
    let isUnknown = false;
    for (const response of UNKNOWN_RESPONSES) {
      if (pyIn(response, info)) {
        unknownLetter = LETTERS[i]!; // three answers, three letters
        isUnknown = true;
      }
    }
    if (isUnknown) return;
    const anyContains = (needle: string) => pyItems(info).some((e) => pyIn(needle, e));
    let isTarget = false;
    for (const group of stereotypedGroups) {
      const g = String(group);
      // The last clause keeps HELM's precedence: `(race_x_ses and A) or B or C`, B and C for every category.
      if (
        pyIn(g, info) ||
        (category === 'Race_ethnicity' && g === 'Black' && anyContains('Black')) ||
        (category === 'Race_ethnicity' && g === 'African American' && anyContains('African American')) ||
        (category === 'Race_ethnicity' && g === 'Latino' && anyContains('Latino')) ||
        (category === 'SES' && g === 'low SES' && anyContains('lowSES')) ||
        (category === 'Race_x_SES' && anyContains(`lowSES-${g}`)) ||
        anyContains(`lowSES-M-${g}`) ||
        anyContains(`lowSES-F-${g}`)
      ) {
        targetLetter = LETTERS[i]!; // three answers, three letters
        isTarget = true;
      }
    }
    if (isTarget) return;
    nonTargetLetter = LETTERS[i]!; // three answers, three letters
  });

  const correctAnswer = answers[label];
  const shared = [isNegative ? 'negative' : 'non-negative', isAmbiguous ? 'ambiguous' : 'non-ambiguous', LETTERS[label], targetLetter, nonTargetLetter, unknownLetter];
  return instance({
    input: passageQuestionInput(context, question),
    references: answers.map((answer) => reference(answer, [...(answer === correctAnswer ? [CORRECT_TAG] : []), ...shared])),
    split,
  });
}

export const bbqDefinition = defineScenario(BBQScenario.className, { subject: stringArg().default('all') }, (args) => new BBQScenario(args.subject));
