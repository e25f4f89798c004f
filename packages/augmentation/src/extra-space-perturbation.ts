import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { Perturbation } from './perturbation.js';

/** `ExtraSpacePerturbation(num_spaces)`: every space becomes `num_spaces` spaces. No random draws. */
export class ExtraSpacePerturbation extends Perturbation {
  readonly name = 'extra_space';

  constructor(readonly numSpaces: number) {
    super();
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true, num_spaces: this.numSpaces });
  }

  perturb(text: string): string {
    return text.replaceAll(' ', ' '.repeat(Math.max(0, this.numSpaces)));
  }
}
