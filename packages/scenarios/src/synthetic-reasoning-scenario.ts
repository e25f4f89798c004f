import { checkNumpySeed, NumpyRandomState } from '@flexhelm/python-compat';
import { HelmError, type Instance } from '@flexhelm/core';
import type { Scenario } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';
import { problemInstances, type Problem } from './problem-instances.js';

const ANIMALS = ['zebra', 'cobra', 'stork', 'penguin', 'shark', 'lion', 'buffalo', 'whale', 'seal', 'eagle', 'horse', 'rat'];
const FRUITS = ['apple', 'peach', 'watermelon', 'banana', 'grape', 'kiwi', 'pear', 'strawberry', 'blueberry', 'blackberry'];
const RULE_SYMBOLS = ['X', 'Y', 'Z'];
const MATH_SYMBOLS = ['+', '-', '*', '='];
const TOKENS = [...ANIMALS, ...FRUITS];

export const SYNTHETIC_REASONING_MODES = ['variable_substitution', 'pattern_match', 'induction'] as const;
export type SyntheticReasoningMode = (typeof SYNTHETIC_REASONING_MODES)[number];

/** Replaces every occurrence of each rule symbol by its substitution (one list element, possibly several words). */
function patternSubst(pattern: string[], substitutions: Map<string, string>): string[] {
  return pattern.map((symbol) => substitutions.get(symbol) ?? symbol);
}

/**
 * HELM's `SyntheticReasoningScenario` (LIME-style pattern matching, variable substitution and induction):
 * 1000 train, 5000 valid and 5000 test problems drawn from one `np.random.RandomState(random_seed)`.
 */
export class SyntheticReasoningScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.synthetic_reasoning_scenario.SyntheticReasoningScenario';
  readonly className = SyntheticReasoningScenario.className;
  readonly name = 'synthetic_reasoning';
  readonly description = 'Synthetic reasoning benchmark';
  readonly tags = ['reasoning', 'language', 'pattern_matching'];
  readonly numTrainInstances = 1000;
  readonly numValInstances = 5000;
  readonly numTestInstances = 5000;

  constructor(
    readonly mode: SyntheticReasoningMode,
    readonly randomSeed = 42,
  ) {
    if (!SYNTHETIC_REASONING_MODES.includes(mode)) {
      throw new HelmError('AssertionError', `Unsupported mode: ${mode}. Use mode=${SYNTHETIC_REASONING_MODES.join(', mode=')}.`);
    }
    checkNumpySeed(randomSeed, 'random_seed');
  }

  async getInstances(): Promise<Instance[]> {
    return this.generate();
  }

  /** The instances, synchronously (generation is pure computation). */
  generate(): Instance[] {
    // HELM creates the generator in __init__, so a second get_instances() continues the stream; each call here
    // starts afresh, which is what a fresh HELM run sees.
    const rng = new NumpyRandomState(this.randomSeed);
    return problemInstances(this.numTrainInstances, this.numValInstances, this.numTestInstances, () => this.generateProblem(rng));
  }

  private generateProblem(rng: NumpyRandomState): Problem {
    const ruleSymbols = choose(rng, RULE_SYMBOLS, rng.randint(2, 4) as number);
    const ruleSymbolSet = [...new Set(ruleSymbols)].sort();
    const mathSymbols = choose(rng, MATH_SYMBOLS, rng.randint(2, 4) as number);

    const pattern = shuffled(rng, [...ruleSymbols, ...mathSymbols]);
    const [substitutions, substitutionsText] = generateSubstitutions(rng, ruleSymbolSet);
    const result = patternSubst(pattern, substitutions);
    const [substitutions2] = generateSubstitutions(rng, ruleSymbolSet);
    const result2 = patternSubst(pattern, substitutions2);

    const resultText = result.join(' ');
    const patternText = pattern.join(' ');
    switch (this.mode) {
      case 'induction':
        return { input: `Two results: ${resultText} | ${result2.join(' ')}`, target: `Rule: ${patternText}` };
      case 'variable_substitution':
        return { input: `Rules: ${patternText} | Substitutions: ${substitutionsText}`, target: resultText };
      case 'pattern_match': {
        // Negatives use the deduplicated symbol set, so they can be shorter than the true pattern.
        const others = [0, 1, 2].map(() => shuffled(rng, [...ruleSymbolSet, ...mathSymbols]).join(' '));
        const all = shuffled(rng, [...others, patternText]);
        return { input: `Rules: ${all.join(' | ')} | Result: ${resultText}`, target: patternText };
      }
    }
  }
}

/** `rng.choice(items, size=n)` with replacement. */
function choose<T>(rng: NumpyRandomState, items: readonly T[], n: number): T[] {
  return rng.choice(items as T[], n) as T[];
}

function shuffled<T>(rng: NumpyRandomState, items: T[]): T[] {
  rng.shuffle(items);
  return items;
}

/** HELM's `gen_subst`: per symbol 1–2 random tokens; returns the map and its `X by " horse " , Z by " kiwi "` text. */
function generateSubstitutions(rng: NumpyRandomState, symbols: string[]): [Map<string, string>, string] {
  const substitutions = new Map<string, string>();
  const parts: string[] = [];
  for (const symbol of symbols) {
    const length = rng.randint(1, 3) as number;
    const text = choose(rng, TOKENS, length).join(' ');
    substitutions.set(symbol, text);
    parts.push(symbol, 'by', '"', text, '"', ',');
  }
  return [substitutions, parts.slice(0, -1).join(' ')];
}

export const syntheticReasoningDefinition = defineScenario(
  SyntheticReasoningScenario.className,
  { mode: stringArg(), random_seed: intArg().default(42) },
  (args) => new SyntheticReasoningScenario(args.mode as SyntheticReasoningMode, args.random_seed),
);
