import { escapeRegExpIgnoreCase, PY_WORD_BOUNDARY } from '@flexhelm/python-compat';
import { matchCase } from './match-case.js';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { helmContractionMap } from './helm-word-lists.js';
import type { DataOptions } from './data-files.js';
import { Perturbation, unmatchedCase } from './perturbation.js';

/**
 * `ContractionPerturbation`: "she is " → "she's ". The expansion → contraction map is HELM's CONTRACTION_MAP
 * reversed (a later contraction of the same expansion wins, at the first one's position); only expansions followed
 * by a space are contracted. No random draws.
 */
export class ContractionPerturbation extends Perturbation {
  readonly name = 'contraction';
  private readonly reverseMap: Map<string, string>;
  private readonly pattern: RegExp;

  /** `contractionMap`: contraction → expansion, e.g. from {@link helmContractionMap}. */
  constructor(contractionMap: ReadonlyMap<string, string>) {
    super();
    this.reverseMap = new Map();
    for (const [contraction, expansion] of contractionMap) this.reverseMap.set(expansion, contraction);
    const alternatives = [...this.reverseMap.keys()].map(escapeRegExpIgnoreCase).join('|');
    this.pattern = new RegExp(`${PY_WORD_BOUNDARY}(${alternatives})${PY_WORD_BOUNDARY} `, 'giu');
  }

  static async create(options?: DataOptions): Promise<ContractionPerturbation> {
    return new ContractionPerturbation(await helmContractionMap(options));
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true });
  }

  perturb(text: string): string {
    return text.replace(this.pattern, (_whole, expansion: string) => {
      const contraction = this.reverseMap.get(expansion) ?? this.reverseMap.get(expansion.toLowerCase());
      if (contraction === undefined) throw unmatchedCase(expansion);
      return `${matchCase(expansion, contraction)} `;
    });
  }
}
