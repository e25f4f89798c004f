import type { PyNumber } from '@flexhelm/python-compat';
import { HelmError, perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { Perturbation } from './perturbation.js';

/**
 * `SynonymPerturbation` is not available: HELM picks the words to replace with spaCy's `en_core_web_sm`
 * part-of-speech tagger (a neural model with no JavaScript port) and lemmatizes with NLTK WordNet's `_morphy`, so
 * its output cannot be reproduced. The class exists so that the error names the cause.
 */
export class SynonymPerturbation extends Perturbation {
  readonly name = 'synonym';

  constructor(readonly prob: PyNumber) {
    super();
    throw new HelmError(
      'NotImplementedError',
      'SynonymPerturbation (data_augmentation=synonym) is not available in flexhelm: HELM 0.2.1 chooses words with ' +
        "spaCy's en_core_web_sm part-of-speech tagger, which cannot run here, so its outputs could not match HELM's. " +
        'Use another perturbation (e.g. misspelling, typo, mild_mix).',
    );
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true, prob: this.prob });
  }

  perturb(): string {
    throw new HelmError('NotImplementedError', 'SynonymPerturbation is not available.');
  }
}
