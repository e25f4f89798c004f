import { pyFloat, type PythonRandom } from '@flexhelm/python-compat';
import { perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { ContractionPerturbation } from './contraction-perturbation.js';
import type { DataOptions } from './data-files.js';
import { helmContractionMap, helmMisspellings } from './helm-word-lists.js';
import { LowerCasePerturbation } from './lower-case-perturbation.js';
import { MisspellingPerturbation } from './misspelling-perturbation.js';
import { Perturbation } from './perturbation.js';
import { SpacePerturbation } from './space-perturbation.js';

/**
 * `MildMixPerturbation`, HELM's canonical robustness perturbation: on the input only, with one generator, lower-case,
 * then contract, then misspell (prob 0.1), then respace (1–3 spaces per run).
 */
export class MildMixPerturbation extends Perturbation {
  readonly name = 'mild_mix';
  private readonly lowercase = new LowerCasePerturbation();
  private readonly contraction: ContractionPerturbation;
  private readonly space = new SpacePerturbation(3);
  private readonly misspelling: MisspellingPerturbation;

  constructor(contractionMap: ReadonlyMap<string, string>, correctToMisspelling: ReadonlyMap<string, readonly string[]>) {
    super();
    this.contraction = new ContractionPerturbation(contractionMap);
    this.misspelling = new MisspellingPerturbation(pyFloat(0.1), correctToMisspelling);
  }

  static async create(options?: DataOptions): Promise<MildMixPerturbation> {
    const [contractions, misspellings] = await Promise.all([helmContractionMap(options), helmMisspellings(options)]);
    return new MildMixPerturbation(contractions, misspellings);
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true });
  }

  perturb(text: string, rng: PythonRandom): string {
    text = this.lowercase.perturb(text);
    text = this.contraction.perturb(text);
    text = this.misspelling.perturb(text, rng);
    return this.space.perturb(text, rng);
  }
}
