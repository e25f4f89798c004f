/** A monomial as the multiset of its variable indices: `[0, 0]` = x², `[0, 1]` = xy, `[]` = the constant. */
export type Term = readonly number[];

const VARIABLE_NAMES = ['x', 'y', 'z'];

/** `combinations_with_replacement(range(n), k)` in itertools' lexicographic order. */
function combinationsWithReplacement(n: number, k: number): number[][] {
  if (k === 0) return [[]];
  const out: number[][] = [];
  const extend = (prefix: number[], start: number): void => {
    if (prefix.length === k) {
      out.push(prefix);
      return;
    }
    for (let v = start; v < n; v++) extend([...prefix, v], v);
  };
  extend([], 0);
  return out;
}

/** HELM's `generate_terms`: all monomials up to `degree` in `numVariables` variables, highest degree first. */
export function generateTerms(degree: number, numVariables: number): Term[] {
  const terms: Term[] = [];
  for (let d = degree; d >= 0; d--) terms.push(...combinationsWithReplacement(numVariables, d));
  return terms;
}

/** `x^2`, `xy`, `y`, `` (HELM's `stringify_terms`: variables by index with their multiplicities). */
function termText(term: Term): string {
  const counts = new Map<number, number>();
  for (const v of [...term].sort((a, b) => a - b)) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].map(([v, power]) => (power === 1 ? VARIABLE_NAMES[v] : `${VARIABLE_NAMES[v]}^${power}`)).join('');
}

function monomialText(coeff: number, term: string): string | undefined {
  if (coeff === 0) return undefined;
  if (coeff === 1) return term || '1';
  if (coeff === -1) return term ? `-${term}` : '-1';
  return `${coeff}${term}`;
}

/** HELM's numeracy `Polynomial`: integer coefficients over {@link generateTerms}, in that order. */
export class Polynomial {
  readonly terms: Term[];

  constructor(
    readonly degree: number,
    readonly numVariables: number,
    readonly coeffs: readonly number[],
  ) {
    this.terms = generateTerms(degree, numVariables);
    if (coeffs.length !== this.terms.length) {
      throw new RangeError(`a degree-${degree} polynomial in ${numVariables} variable(s) has ${this.terms.length} coefficients, got ${coeffs.length}`);
    }
  }

  /** The value at the point `vals` (one integer per variable). */
  evaluate(vals: readonly number[]): number {
    let sum = 0;
    this.terms.forEach((term, i) => {
      sum += this.coeffs[i]! * term.reduce((product, v) => product * vals[v]!, 1);
    });
    return sum;
  }

  /** `2x^2 + xy - 3y + 5`: zero terms dropped, unit coefficients elided, `+ -` written as `-`. */
  toString(): string {
    const monomials = this.terms
      .map((term, i) => monomialText(this.coeffs[i]!, termText(term)))
      .filter((m): m is string => Boolean(m));
    return monomials.join(' + ').replaceAll(' + -', ' - ');
  }
}
