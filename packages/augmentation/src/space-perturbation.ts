import type { PythonRandom } from '@flexhelm/python-compat';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { Perturbation } from './perturbation.js';

/** `SpacePerturbation(max_spaces)`: each run of spaces becomes `randint(1, max_spaces)` spaces. */
export class SpacePerturbation extends Perturbation {
  readonly name = 'space';

  constructor(readonly maxSpaces: number) {
    super();
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true, max_spaces: this.maxSpaces });
  }

  perturb(text: string, rng: PythonRandom): string {
    return text.replace(/ +/g, () => ' '.repeat(rng.randint(1, this.maxSpaces)));
  }
}
