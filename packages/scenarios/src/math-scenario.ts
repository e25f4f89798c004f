import { pyListdir } from '@flexhelm/python-compat';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readFile, stat } from 'node:fs/promises';
import { boxedAnswer, CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { z } from 'zod';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { boolArg, defineScenario, stringArg } from './scenario-definition.js';

/**
 * What Hugging Face `load_dataset("competition_math")` (datasets 2.5.2) reads: its loading script downloads this
 * archive and yields every `MATH/{split}/*\/*` file (glob order, i.e. directory order) parsed as JSON.
 */
export const MATH_DATA_URL = 'https://people.eecs.berkeley.edu/~hendrycks/MATH.tar';

/** HELM's subject argument → the dataset's `type`. */
export const MATH_SUBJECTS: Readonly<Record<string, string>> = {
  number_theory: 'Number Theory',
  intermediate_algebra: 'Intermediate Algebra',
  algebra: 'Algebra',
  prealgebra: 'Prealgebra',
  geometry: 'Geometry',
  counting_and_probability: 'Counting & Probability',
  precalculus: 'Precalculus',
};

/** HELM's eight fixed in-context examples for `use_official_examples` (problem, answer). */
const OFFICIAL_EXAMPLES: readonly (readonly [string, string])[] = [
  ['What is $\\left(\\frac{7}{8}\\right)^3 \\cdot \\left(\\frac{7}{8}\\right)^{-3}$?', '1'],
  ['In how many ways can 4 books be selected from a shelf of 6 books if the order in which the books are selected does not matter?', '15'],
  ['Find the distance between the points $(2,1,-4)$ and $(5,8,-3).$', '\\sqrt{59}'],
  [
    'The faces of an octahedral die are labeled with digits $1$ through $8$. What is the probability, expressed as a common fraction, of rolling a sum of $15$ with a pair of such octahedral dice?',
    '\\frac{1}{32}',
  ],
  ['The first three terms of an arithmetic sequence are 1, 10 and 19, respectively. What is the value of the 21st term?', '181'],
  ['Calculate $6 \\cdot 8\\frac{1}{3}', '50'],
  ['When the binary number $100101110010_2$ is divided by 4, what is the remainder (give your answer in base 10)?', '2'],
  ['How many zeros are at the end of the product 25 $\\times$ 240?', '3'],
];

/** One MATH problem file: the fields the dataset's features keep. */
export interface MathExample {
  problem: string;
  level: string;
  type: string;
  solution: string;
}

/**
 * HELM's `MATHScenario` (Hendrycks et al. 2021): one subject's problems at one level, train and test, the reference
 * being the last `\boxed{…}` of the solution (problems without one are skipped), or the whole solution with
 * `use_chain_of_thought`; `use_official_examples` replaces the train split with HELM's eight fixed examples.
 */
export class MATHScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.math_scenario.MATHScenario';
  readonly className = MATHScenario.className;
  readonly name = 'MATH';
  readonly description = 'Mathematical Problem Solving';
  readonly tags = ['knowledge', 'reasoning'];
  readonly subject: string;
  readonly level: string;

  constructor(
    subject: string,
    level: string,
    readonly useOfficialExamples = false,
    readonly useChainOfThought = false,
  ) {
    const type = Object.hasOwn(MATH_SUBJECTS, subject) ? MATH_SUBJECTS[subject] : undefined;
    if (type === undefined) throw new HelmError('KeyError', `'${subject}': unknown MATH subject; use one of ${Object.keys(MATH_SUBJECTS).join(', ')}.`);
    this.subject = type;
    this.level = `Level ${level}`;
    if (useChainOfThought && useOfficialExamples) throw new HelmError('AssertionError', 'Cannot use official examples when use_chain_of_thought is True.');
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const root = await downloadSource(context, this.name, { url: MATH_DATA_URL, path: 'MATH', unpack: 'tar' });
    const instances: Instance[] = [];
    for (const [split, splitName] of [
      [TRAIN_SPLIT, 'train'],
      [TEST_SPLIT, 'test'],
    ] as const) {
      let examples: { problem: string; answer: string }[];
      if (split === TRAIN_SPLIT && this.useOfficialExamples) {
        examples = OFFICIAL_EXAMPLES.map(([problem, answer]) => ({ problem, answer }));
      } else {
        examples = this.selectExamples(await readMathSplit(root, splitName));
      }
      for (const { problem, answer } of examples) instances.push(instance({ input: { text: problem }, references: [reference(answer, [CORRECT_TAG])], split }));
    }
    return instances;
  }

  /** The examples of this subject and level, with their answers. */
  selectExamples(examples: readonly MathExample[]): { problem: string; answer: string }[] {
    const selected: { problem: string; answer: string }[] = [];
    for (const example of examples) {
      if (example.type !== this.subject || example.level !== this.level) continue;
      const answer = this.useChainOfThought ? example.solution : boxedAnswer(example.solution);
      if (answer === null) continue;
      selected.push({ problem: example.problem, answer });
    }
    return selected;
  }
}

const exampleSchema = z.object({ problem: z.string(), level: z.string(), type: z.string(), solution: z.string() });

/**
 * One split of the dataset as the loading script yields it: `glob("{root}/{split}/*\/*")` — non-hidden entries of
 * non-hidden subfolders, both in directory order — each file parsed as JSON.
 */
export async function readMathSplit(root: string, split: string): Promise<MathExample[]> {
  // The archive unpacks to a single MATH folder, which the download step moves into place as `root`; should the
  // archive carry other top-level entries, MATH is one level down.
  const base = existsSync(join(root, 'MATH')) && !existsSync(join(root, split)) ? join(root, 'MATH') : root;
  const splitDir = join(base, split);
  const visible = (name: string) => !name.startsWith('.');
  const examples: MathExample[] = [];
  let subjects: string[];
  try {
    subjects = (await pyListdir(splitDir)).filter(visible);
  } catch {
    return examples; // glob yields nothing for a missing folder
  }
  for (const subject of subjects) {
    const subjectDir = join(splitDir, subject);
    if (!(await stat(subjectDir)).isDirectory()) continue;
    for (const name of (await pyListdir(subjectDir)).filter(visible)) {
      const path = join(subjectDir, name);
      let parsed: unknown;
      try {
        parsed = JSON.parse((await readFile(path, 'utf8')).replace(/^\uFEFF/, '')); // json.loads(bytes) drops a BOM
      } catch (error) {
        throw new HelmError('ValueError', `${path} is not a MATH problem JSON file (${(error as Error).message}); the download may be damaged: delete ${root} and run again.`);
      }
      const example = exampleSchema.safeParse(parsed);
      if (!example.success) throw new HelmError('ValueError', `${path} should hold string fields problem, level, type and solution: ${example.error.issues[0]!.message}.`);
      examples.push(example.data);
    }
  }
  return examples;
}

export const mathDefinition = defineScenario(
  MATHScenario.className,
  {
    subject: stringArg(),
    level: z.union([z.string(), z.number().int()], { error: 'must be a string such as "1"' }).transform(String),
    use_official_examples: boolArg().default(false),
    use_chain_of_thought: boolArg().default(false),
  },
  (args) => new MATHScenario(args.subject, args.level, args.use_official_examples, args.use_chain_of_thought),
);
