import { escapeRegExpIgnoreCase, PY_WORD_BOUNDARY } from '@flexhelm/python-compat';
import { matchCase } from './match-case.js';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { helmContractionMap } from './helm-word-lists.js';
import type { DataOptions } from './data-files.js';
import { Perturbation, unmatchedCase } from './perturbation.js';

/** `ExpansionPerturbation`: "she's" → "she is", with HELM's CONTRACTION_MAP, case kept. No random draws. */
export class ExpansionPerturbation extends Perturbation {
  readonly name = 'expansion';
  private readonly pattern: RegExp;

  constructor(private readonly contractionMap: ReadonlyMap<string, string>) {
    super();
    const alternatives = [...contractionMap.keys()].map(escapeRegExpIgnoreCase).join('|');
    this.pattern = new RegExp(`${PY_WORD_BOUNDARY}(${alternatives})${PY_WORD_BOUNDARY}`, 'giu');
  }

  static async create(options?: DataOptions): Promise<ExpansionPerturbation> {
    return new ExpansionPerturbation(await helmContractionMap(options));
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true });
  }

  perturb(text: string): string {
    return text.replace(this.pattern, (contraction: string) => {
      const expansion = this.contractionMap.get(contraction) ?? this.contractionMap.get(contraction.toLowerCase());
      if (expansion === undefined) throw unmatchedCase(contraction);
      return matchCase(contraction, expansion);
    });
  }
}
