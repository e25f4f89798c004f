import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { Perturbation } from './perturbation.js';

/** `LowerCasePerturbation`: `str.lower()` (JS `toLowerCase` applies the same full Unicode mapping). */
export class LowerCasePerturbation extends Perturbation {
  readonly name = 'lowercase';

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true });
  }

  perturb(text: string): string {
    return text.toLowerCase();
  }
}
