import { checkNumpySeed, NumpyRandomState, PythonRandom, PythonSet } from '@flexhelm/python-compat';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, instance, reference, type Instance, type Reference } from '@flexhelm/core';
import type { Scenario } from './scenario.js';
import { boolArg, defineScenario, intArg, stringArg } from './scenario-definition.js';
import { Polynomial, generateTerms } from './polynomial.js';

export const NUMERACY_SOLUTION_TAG = 'solution';
export const NUMERACY_CLASS_TAG = 'class';

/** Inclusive integer ranges, one per coefficient or per variable. */
export type IntRanges = readonly (readonly [number, number])[];

export interface RelationTypeInfo {
  name: string;
  degree: number;
  numVariables: number;
  /** Inclusive range of each coefficient, in {@link generateTerms} order. */
  range: IntRanges;
  exampleCoeffs: readonly number[];
}

export const NUMERACY_RELATION_TYPES: ReadonlyMap<string, RelationTypeInfo> = new Map([
  ['linear', { name: 'linear', degree: 1, numVariables: 1, range: [[1, 5], [1, 5]], exampleCoeffs: [2, 5] }],
  // Parabolas with their axis of symmetry left of the origin.
  ['parabola', { name: 'parabola', degree: 2, numVariables: 1, range: [[1, 2], [0, 2], [1, 5]], exampleCoeffs: [1, 0, 2] }],
  ['plane', { name: 'plane', degree: 1, numVariables: 2, range: [[1, 5], [1, 5], [1, 5]], exampleCoeffs: [2, 1, 5] }],
  // Elliptic paraboloids z = A x^2 + B xy + C y^2 + F: the x and y coefficients are pinned to 0, xy is 0 or 1.
  ['paraboloid', { name: 'paraboloid', degree: 2, numVariables: 2, range: [[1, 2], [0, 1], [1, 2], [0, 0], [0, 0], [1, 5]], exampleCoeffs: [2, 0, 1, 0, 0, 2] }],
] as [string, RelationTypeInfo][]);

export interface NumeracyModeInfo {
  numFunctionTrain: number;
  numFunctionTest: number;
  numTrain: number;
  numTest: number;
}

export const NUMERACY_MODES: ReadonlyMap<string, NumeracyModeInfo> = new Map([
  ['example', { numFunctionTrain: 1, numFunctionTest: 1, numTrain: 100, numTest: 100 }],
  ['standard', { numFunctionTrain: 1, numFunctionTest: 1, numTrain: 100, numTest: 100 }],
  ['function', { numFunctionTrain: 1000, numFunctionTest: 1000, numTrain: 100, numTest: 1 }],
]);

const MAX_ATTEMPTS = 100;

function binomial(n: number, k: number): number {
  let result = 1;
  for (let i = 1; i <= k; i++) result = (result * (n - k + i)) / i;
  return Math.round(result);
}

/**
 * HELM's `generate_polynomial`: coefficients drawn with `random.randint` per range until the polynomial has a non-zero
 * constant (strictConstant), a non-vanishing top degree (strictDegree) and a pure term in every variable (strictVariables).
 */
export function generatePolynomial(
  random: PythonRandom,
  degree: number,
  numVariables: number,
  rangeCoeffs: IntRanges,
  { strictDegree = true, strictVariables = true, strictConstant = true } = {},
): Polynomial {
  const terms = generateTerms(degree, numVariables);
  const topDegreeTerms = binomial(degree + numVariables - 1, numVariables - 1);
  for (let attempt = 1; ; attempt++) {
    const coeffs = rangeCoeffs.map(([low, high]) => random.randint(low, high));
    let done = true;
    if (strictConstant && coeffs[coeffs.length - 1] === 0) done = false;
    if (strictDegree && coeffs.slice(0, topDegreeTerms).reduce((a, b) => a + b, 0) === 0) done = false;
    if (strictVariables) {
      for (let v = 0; v < numVariables; v++) {
        // The polynomial restricted to the v-th axis (constant excluded) must not vanish identically.
        const onAxis = terms.slice(0, -1).reduce((sum, term, i) => sum + (term.every((t) => t === v) ? coeffs[i]! : 0), 0);
        if (onAxis === 0) {
          done = false;
          break;
        }
      }
    }
    if (done) return new Polynomial(degree, numVariables, coeffs);
    if (attempt >= MAX_ATTEMPTS) {
      const ranges = `[${rangeCoeffs.map(([a, b]) => `(${a}, ${b})`).join(', ')}]`;
      throw new HelmError('ValueError', `Failed to sample valid polynomial equation within ${MAX_ATTEMPTS} attempts from ranges ${ranges}.`);
    }
  }
}

const RANGE_CHOICES = [0, 1, 2, 5, 10, 20, 50, 100, 200];

/**
 * HELM's `select_ranges`: the smallest symmetric (or non-negative) box holding enough points; with `overlap` train and
 * test share it, otherwise test gets the inner box and train the smallest box whose border ring is big enough.
 */
export function selectRanges(numTrain: number, numTest: number, dim: number, overlap: boolean, nonnegativeOnly: boolean): [IntRanges, IntRanges] {
  const numPoints = RANGE_CHOICES.map((c) => (nonnegativeOnly ? c + 1 : 2 * c + 1) ** dim);
  const selectIndex = (counts: number[], wanted: number): number => {
    const index = counts.findIndex((count) => count >= wanted);
    if (index < 0) throw new HelmError('ValueError', `no range among ${RANGE_CHOICES.join(', ')} holds ${wanted} points in ${dim} dimension(s)`);
    return index;
  };
  const box = (index: number): IntRanges =>
    Array.from({ length: dim }, () => [nonnegativeOnly ? 0 : -RANGE_CHOICES[index]!, RANGE_CHOICES[index]!] as const);
  let trainIndex: number;
  let testIndex: number;
  if (overlap) {
    trainIndex = testIndex = selectIndex(numPoints, numTrain + numTest);
  } else {
    testIndex = selectIndex(numPoints, numTest);
    trainIndex = selectIndex(numPoints.map((n) => n - numPoints[testIndex]!), numTrain);
  }
  return [box(trainIndex), box(testIndex)];
}

/** `itertools.product(*[range(a, b + 1) for (a, b) in ranges])`: points as tuples, last coordinate fastest. */
function gridPoints(ranges: IntRanges): number[][] {
  let points: number[][] = [[]];
  for (const [low, high] of ranges) {
    const next: number[][] = [];
    for (const p of points) for (let v = low; v <= high; v++) next.push([...p, v]);
    points = next;
  }
  return points;
}

/** Python's tuple ordering, for `sorted(points)`. */
function compareTuples(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

export interface NumeracyOptions {
  relationType?: string;
  mode?: string;
  /** Required by `getInstances` (HELM asserts it); `null` = not given. */
  seed?: number | null;
  /** Whether in-context and eval points come from the same region. */
  overlap?: boolean;
  /** Whether to sort the in-context examples. */
  sortVals?: boolean;
}

/**
 * HELM's `NumeracyScenario` (polynomial induction): evaluate an unknown integer polynomial at a point, given 100
 * evaluations. Modes: `standard` (a random polynomial of the class), `example` (a fixed representative) and
 * `function`, which yields no instances in HELM 0.2.1 (its generator was never ported to the new adapters).
 */
export class NumeracyScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.numeracy_scenario.NumeracyScenario';
  readonly className = NumeracyScenario.className;
  readonly name = 'numeracy';
  readonly description = 'polynomial induction';
  readonly tags: string[] = [];
  readonly delimiter = ', ';
  readonly relationType: string;
  readonly mode: string;
  readonly seed: number | null;
  readonly overlap: boolean;
  readonly sortVals: boolean;
  readonly relation: RelationTypeInfo;
  readonly modeInfo: NumeracyModeInfo;

  constructor({ relationType = 'linear', mode = 'function', seed = null, overlap = true, sortVals = false }: NumeracyOptions = {}) {
    const relation = NUMERACY_RELATION_TYPES.get(relationType);
    if (!relation) {
      throw new HelmError('AssertionError', `Unknown relation_type ${JSON.stringify(relationType)}: use one of ${[...NUMERACY_RELATION_TYPES.keys()].join(', ')}.`);
    }
    const modeInfo = NUMERACY_MODES.get(mode);
    if (!modeInfo) throw new HelmError('AssertionError', `Unknown mode ${JSON.stringify(mode)}: use one of ${[...NUMERACY_MODES.keys()].join(', ')}.`);
    if (seed !== null) checkNumpySeed(seed, 'seed');
    this.relationType = relationType;
    this.mode = mode;
    this.seed = seed;
    this.overlap = overlap;
    this.sortVals = sortVals;
    this.relation = relation;
    this.modeInfo = modeInfo;
  }

  /** The output variable: `y` for one input variable, `z` for two. */
  get outputVariable(): string {
    return ['x', 'y', 'z'][this.relation.numVariables]!; // one or two variables
  }

  async getInstances(): Promise<Instance[]> {
    return this.generate();
  }

  generate(): Instance[] {
    if (this.seed === null) {
      throw new HelmError('AssertionError', 'NumeracyScenario needs a seed: add seed=<int> to the scenario args (run specs use seed=0).');
    }
    const random = new PythonRandom(this.seed);
    const numpy = new NumpyRandomState(this.seed);
    const { degree, numVariables, range } = this.relation;

    switch (this.mode) {
      case 'example':
        return this.datapointInstances(numpy, new Polynomial(degree, numVariables, this.relation.exampleCoeffs));
      case 'standard':
        return this.datapointInstances(numpy, generatePolynomial(random, degree, numVariables, range));
      default:
        // HELM 0.2.1's `generate_datasets` returns [] without drawing anything.
        return [];
    }
  }

  private points(): { trainVals: number[][]; testVals: number[][] } {
    const { numVariables, name } = this.relation;
    const [trainRange, testRange] = selectRanges(100, 100, numVariables, this.overlap, name === 'parabola' || name === 'paraboloid');
    let testVals = gridPoints(testRange);
    let trainVals = this.overlap ? testVals : [...PythonSet.from(gridPoints(trainRange)).difference(PythonSet.from(testVals))];
    if (this.sortVals) trainVals = [...trainVals].sort(compareTuples);
    if (numVariables === 2) {
      testVals = testVals.filter((p) => p[0]! <= p[1]!);
      trainVals = trainVals.filter((p) => p[0]! <= p[1]!);
    }
    return { trainVals, testVals };
  }

  private datapointInstances(numpy: NumpyRandomState, rel: Polynomial): Instance[] {
    const { numTrain, numTest } = this.modeInfo;
    const { trainVals, testVals } = this.points();
    let trainIdxs = sampleWithoutReplacement(numpy, range(trainVals.length), numTrain);
    if (this.sortVals) trainIdxs = [...trainIdxs].sort((a, b) => a - b);
    const allTestIdxs = this.overlap
      ? [...PythonSet.from(range(testVals.length)).difference(PythonSet.from(trainIdxs))]
      : range(testVals.length);
    const testIdxs = sampleWithoutReplacement(numpy, allTestIdxs, numTest);
    return [
      ...this.splitInstances(rel, trainIdxs, trainVals, TRAIN_SPLIT),
      ...this.splitInstances(rel, testIdxs, testVals, TEST_SPLIT),
    ];
  }

  private splitInstances(rel: Polynomial, idxs: number[], points: number[][], split: string): Instance[] {
    const solution = `${this.outputVariable} = ${rel.toString()}`;
    return idxs.map((idx) => {
      const point = points[idx]!; // idxs are sampled from the points' positions
      const references: Reference[] = [
        reference(String(rel.evaluate(point)), [CORRECT_TAG]),
        reference(solution, [NUMERACY_SOLUTION_TAG]),
        reference(this.relationType, [NUMERACY_CLASS_TAG]),
      ];
      return instance({ input: { text: point.join(this.delimiter) }, references, split });
    });
  }
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/** `np.random.choice(items, k, replace=False)`: the first `k` of a permutation, with numpy's error for `k > len`. */
function sampleWithoutReplacement(numpy: NumpyRandomState, items: number[], k: number): number[] {
  if (k > items.length) {
    throw new HelmError('ValueError', `Cannot take a larger sample than population when 'replace=False' (${k} points wanted, ${items.length} available); use overlap=True for two-variable relations.`);
  }
  const order = numpy.permutation(items.length) as number[];
  return order.slice(0, k).map((i) => items[i]!);
}

export const numeracyDefinition = defineScenario(
  NumeracyScenario.className,
  {
    relation_type: stringArg().default('linear'),
    mode: stringArg().default('function'),
    seed: intArg().nullable().default(null),
    overlap: boolArg().default(true),
    sort_vals: boolArg().default(false),
  },
  (args) =>
    new NumeracyScenario({
      relationType: args.relation_type,
      mode: args.mode,
      seed: args.seed,
      overlap: args.overlap,
      sortVals: args.sort_vals,
    }),
);
