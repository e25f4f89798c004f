import { escapeRegExp, PY_WORD_BOUNDARY, type PyNumber, type PythonRandom, toNumber } from '@flexhelm/python-compat';
import { matchCase } from './match-case.js';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import type { DataOptions } from './data-files.js';
import { helmMisspellings } from './helm-word-lists.js';
import { Perturbation } from './perturbation.js';

/**
 * `MisspellingPerturbation(prob)`: every word (or multi-word phrase) that has common misspellings is, left to right,
 * replaced with probability `prob` by a random one of them, case kept. Per match: `random() < prob`, then `choice`.
 */
export class MisspellingPerturbation extends Perturbation {
  readonly name = 'misspellings';
  private readonly pattern: RegExp;

  /** `correctToMisspelling`: word → misspellings, e.g. HELM's `correct_to_misspelling.json` via {@link helmMisspellings}. */
  constructor(
    readonly prob: PyNumber,
    private readonly correctToMisspelling: ReadonlyMap<string, readonly string[]>,
  ) {
    super();
    // Keys are tried in file order at each position (ordered alternation), exactly like Python's `re`.
    const alternatives = [...correctToMisspelling.keys()].map(escapeRegExp).join('|');
    this.pattern = new RegExp(`${PY_WORD_BOUNDARY}(${alternatives})${PY_WORD_BOUNDARY}`, 'gu');
  }

  static async create(prob: PyNumber, options?: DataOptions): Promise<MisspellingPerturbation> {
    return new MisspellingPerturbation(prob, await helmMisspellings(options));
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true, prob: this.prob });
  }

  perturb(text: string, rng: PythonRandom): string {
    const prob = toNumber(this.prob);
    return text.replace(this.pattern, (word: string) => {
      if (rng.random() < prob) return matchCase(word, rng.choice(this.correctToMisspelling.get(word)!));
      return word;
    });
  }
}
