import { checkNumpySeed, NumpyRandomState, PythonRandom } from '@flexhelm/python-compat';
import { z } from 'zod';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import type { Scenario } from './scenario.js';
import { defineScenario, floatArg, intArg } from './scenario-definition.js';

export const DEFAULT_PARENTHESIS_PAIRS: readonly (readonly [string, string])[] = [
  ['(', ')'],
  ['[', ']'],
  ['{', '}'],
  ['<', '>'],
];

export interface DyckLanguageOptions {
  numTrainInstances?: number;
  numTestInstances?: number;
  parenthesisPairs?: readonly (readonly [string, string])[];
  probP?: number;
  probQ?: number;
  maxRecursiveDepth?: number;
  minSeqTrainLength?: number;
  maxSeqTrainLength?: number;
  minSeqTestLength?: number;
  maxSeqTestLength?: number;
  maxOutputSize?: number;
  seed?: number;
}

/** The two generators HELM's Dyck code draws from: Python's global `random` and numpy's global RandomState. */
interface Generators {
  random: PythonRandom;
  numpy: NumpyRandomState;
}

/**
 * HELM's `DyckLanguageScenario` (Suzgun et al. 2019): complete the closing brackets of a Dyck-n prefix.
 * Sequences come from the PCFG S → (_i S )_i (p/n each) | S S (q) | ε (1−p−q).
 */
export class DyckLanguageScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario';
  readonly className = DyckLanguageScenario.className;
  readonly name = 'dyck_language';
  readonly description = 'Generate the closing parentheses of a Dyck-n prefix';
  readonly tags = ['reasoning', 'language', 'hierarchy'];

  readonly numTrainInstances: number;
  readonly numTestInstances: number;
  readonly opening: string[];
  readonly closing: string[];
  readonly probP: number;
  readonly probQ: number;
  readonly maxRecursiveDepth: number;
  readonly minSeqTrainLength: number;
  readonly maxSeqTrainLength: number;
  readonly minSeqTestLength: number;
  readonly maxSeqTestLength: number;
  readonly maxOutputSize: number;
  readonly seed: number;

  constructor(
    readonly numParenthesisPairs: number,
    options: DyckLanguageOptions = {},
  ) {
    this.probP = options.probP ?? 0.5;
    this.probQ = options.probQ ?? 0.25;
    if (!(this.probP > 0 && this.probQ > 0 && this.probP + this.probQ < 1)) {
      throw new HelmError('ValueError', `prob_p=${this.probP}, prob_q=${this.probQ}: it must be the case that 0 < prob_p, prob_q < 1 and 0 < prob_p + prob_q < 1.`);
    }
    // HELM accepts 0 here and only fails later inside numpy; refuse it up front with the same wording.
    if (!Number.isInteger(numParenthesisPairs) || numParenthesisPairs < 1 || numParenthesisPairs > 4) {
      throw new HelmError('ValueError', `num_parenthesis_pairs=${numParenthesisPairs}: the number of parenthesis pairs should be a number between 1 and 4 (inclusive).`);
    }
    const pairs = (options.parenthesisPairs ?? DEFAULT_PARENTHESIS_PAIRS).slice(0, numParenthesisPairs);
    if (pairs.length < numParenthesisPairs) {
      throw new HelmError('ValueError', `num_parenthesis_pairs=${numParenthesisPairs} but only ${pairs.length} parenthesis_pairs were given; pass at least as many pairs.`);
    }
    this.opening = pairs.map((p) => p[0]);
    this.closing = pairs.map((p) => p[1]);
    this.numTrainInstances = options.numTrainInstances ?? 3;
    this.numTestInstances = options.numTestInstances ?? 500;
    this.maxRecursiveDepth = options.maxRecursiveDepth ?? 100;
    this.minSeqTrainLength = options.minSeqTrainLength ?? 4;
    this.maxSeqTrainLength = options.maxSeqTrainLength ?? 50;
    this.minSeqTestLength = options.minSeqTestLength ?? 52;
    this.maxSeqTestLength = options.maxSeqTestLength ?? 100;
    this.maxOutputSize = options.maxOutputSize ?? 3;
    this.seed = options.seed ?? 42;
    checkNumpySeed(this.seed, 'seed');
    for (const [split, min, max] of [['train', this.minSeqTrainLength, this.maxSeqTrainLength], ['test', this.minSeqTestLength, this.maxSeqTestLength]] as const) {
      // HELM would loop forever looking for such a sequence.
      if (min > max) throw new HelmError('ValueError', `min_seq_${split}_length=${min} exceeds max_seq_${split}_length=${max}; no sequence can satisfy both.`);
    }
    if (this.maxOutputSize < 1) {
      throw new HelmError('ValueError', `max_output_size=${this.maxOutputSize}: it must be at least 1 (random.randint(1, max_output_size) has an empty range).`);
    }
  }

  async getInstances(): Promise<Instance[]> {
    return this.generate();
  }

  generate(): Instance[] {
    const gens: Generators = { random: new PythonRandom(this.seed), numpy: new NumpyRandomState(this.seed) };
    const train = this.createCorpus(gens, TRAIN_SPLIT, this.numTrainInstances, this.minSeqTrainLength, this.maxSeqTrainLength, new Set());
    const test = this.createCorpus(gens, TEST_SPLIT, this.numTestInstances, this.minSeqTestLength, this.maxSeqTestLength, train.inputs);
    return [...train.instances, ...test.instances];
  }

  /**
   * One PCFG sample. Only the outermost call gets `maxLength`; nested calls use HELM's default of 100, and a
   * sample longer than its limit collapses to the empty sequence.
   */
  private generateSequence(gens: Generators, depth: number, maxLength = 100): string[] {
    if (depth > this.maxRecursiveDepth) return [];
    const prob = gens.random.random();
    let sequence: string[];
    if (prob < this.probP) {
      const index = gens.numpy.randint(0, this.opening.length) as number;
      const infix = this.generateSequence(gens, depth + 1);
      sequence = [this.opening[index]!, ...infix, this.closing[index]!];
    } else if (prob < this.probP + this.probQ) {
      const left = this.generateSequence(gens, depth);
      const right = this.generateSequence(gens, depth);
      sequence = left.concat(right);
    } else {
      sequence = [];
    }
    return sequence.length <= maxLength ? sequence : [];
  }

  /** Cuts the sequence where, counting from the end, closers outnumber openers by exactly `maxN`. */
  private inputPrefix(sequence: string[], maxN: number): string[] {
    let depth = 0;
    for (let i = sequence.length - 1; i >= 0; i--) {
      depth += this.opening.includes(sequence[i]!) ? -1 : 1;
      if (depth === maxN) return sequence.slice(0, i);
    }
    return [];
  }

  /** The closers of the brackets still open at the end of `input`, innermost first. */
  private closingSuffix(input: string[]): string[] {
    const stack: string[] = [];
    for (const symbol of input) {
      const index = this.opening.indexOf(symbol);
      if (index >= 0) stack.push(this.closing[index]!);
      else stack.pop();
    }
    return stack.reverse();
  }

  private createInputOutput(gens: Generators, minLength: number, maxLength: number): [string, string] {
    for (;;) {
      const sequence = this.generateSequence(gens, 0, maxLength);
      if (sequence.length < minLength) continue;
      const depth = gens.random.randint(1, this.maxOutputSize);
      const input = this.inputPrefix(sequence, depth);
      if (input.length > 0) return [input.join(' '), this.closingSuffix(input).join(' ')];
    }
  }

  private createCorpus(gens: Generators, split: string, size: number, minLength: number, maxLength: number, notAllowed: ReadonlySet<string>) {
    const inputs = new Set<string>();
    const instances: Instance[] = [];
    while (instances.length < size) {
      const [input, output] = this.createInputOutput(gens, minLength, maxLength);
      if (inputs.has(input) || notAllowed.has(input)) continue;
      inputs.add(input);
      instances.push(instance({ input: { text: input }, references: [reference(` ${output}`, [CORRECT_TAG])], split }));
    }
    return { inputs, instances };
  }
}

const nonNegativeInt = () => intArg('a non-negative int').min(0, { error: 'must be a non-negative int' });

export const dyckLanguageDefinition = defineScenario(
  DyckLanguageScenario.className,
  {
    num_parenthesis_pairs: intArg(),
    num_train_instances: nonNegativeInt().default(3),
    num_test_instances: nonNegativeInt().default(500),
    parenthesis_pairs: z
      .array(z.tuple([z.string().min(1), z.string().min(1)]), { error: 'must be a list of [open, close] string pairs' })
      .default(DEFAULT_PARENTHESIS_PAIRS.map((p) => [p[0], p[1]] as [string, string])),
    prob_p: floatArg().default(0.5),
    prob_q: floatArg().default(0.25),
    max_recursive_depth: intArg().default(100),
    min_seq_train_length: intArg().default(4),
    max_seq_train_length: intArg().default(50),
    min_seq_test_length: intArg().default(52),
    max_seq_test_length: intArg().default(100),
    max_output_size: intArg().default(3),
    seed: intArg().default(42),
  },
  (args) =>
    new DyckLanguageScenario(args.num_parenthesis_pairs, {
      numTrainInstances: args.num_train_instances,
      numTestInstances: args.num_test_instances,
      parenthesisPairs: args.parenthesis_pairs,
      probP: args.prob_p,
      probQ: args.prob_q,
      maxRecursiveDepth: args.max_recursive_depth,
      minSeqTrainLength: args.min_seq_train_length,
      maxSeqTrainLength: args.max_seq_train_length,
      minSeqTestLength: args.min_seq_test_length,
      maxSeqTestLength: args.max_seq_test_length,
      maxOutputSize: args.max_output_size,
      seed: args.seed,
    }),
);
