import { type PyNumber, type PythonRandom, toNumber } from '@flexhelm/python-compat';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import type { DataOptions } from './data-files.js';
import { helmKeyboardNeighbours } from './helm-word-lists.js';
import { Perturbation } from './perturbation.js';

/**
 * `TyposPerturbation(prob)`: each letter a–z (either case) is, with probability `prob`, replaced by a neighbouring
 * key. Every character is lower-cased on the way and upper-cased back only if lowering changed it, as in HELM.
 */
export class TyposPerturbation extends Perturbation {
  readonly name = 'typos';

  /** `keyboardNeighbours`: letter → string of neighbouring keys, e.g. HELM's via {@link helmKeyboardNeighbours}. */
  constructor(
    readonly prob: PyNumber,
    private readonly keyboardNeighbours: ReadonlyMap<string, string>,
  ) {
    super();
  }

  static async create(prob: PyNumber, options?: DataOptions): Promise<TyposPerturbation> {
    return new TyposPerturbation(prob, await helmKeyboardNeighbours(options));
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true, prob: this.prob });
  }

  perturb(text: string, rng: PythonRandom): string {
    const prob = toNumber(this.prob);
    let out = '';
    for (const letter of text) {
      const lower = letter.toLowerCase();
      const neighbours = this.keyboardNeighbours.get(lower);
      let replacement = lower;
      if (neighbours !== undefined && rng.random() < prob) replacement = rng.choice(Array.from(neighbours));
      out += lower === letter ? replacement : replacement.toUpperCase();
    }
    return out;
  }
}
