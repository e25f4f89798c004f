import { HelmError, instance as makeInstance, perturbationDescription, type Instance, type PerturbationDescription } from '@flexhelm/core';
import { Perturbation, withSeed } from './perturbation.js';

/**
 * `ContrastSetsPerturbation` (BoolQ, IMDB): swaps in one of the instance's own `contrast_inputs` (with its
 * `contrast_references`), chosen by `choice(range(n))` with the usual generator. Instances without contrast sets
 * come back unchanged (and are skipped as unchanged by the augmenter).
 */
export class ContrastSetsPerturbation extends Perturbation {
  readonly name = 'contrast_sets';
  override readonly shouldPerturbReferences = true;

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, { robustness: true });
  }

  override apply(inst: Instance, seed?: number): Instance {
    const rng = this.getRng(inst, seed);
    let { input, references } = inst;
    if (inst.contrast_inputs !== undefined && inst.contrast_references !== undefined) {
      const index = rng.choice(Array.from(inst.contrast_inputs.keys()));
      input = inst.contrast_inputs[index]!;
      // HELM pairs the two lists by index; a shorter references list is a malformed instance.
      const refs = inst.contrast_references[index];
      if (refs === undefined) throw new HelmError('IndexError', `list index out of range: instance ${inst.id ?? '?'} has ${inst.contrast_inputs.length} contrast inputs but ${inst.contrast_references.length} contrast reference lists`);
      references = refs;
    }
    return makeInstance({ ...inst, input, references, perturbation: withSeed(this.description, seed) });
  }

  /** Unused: the contrast input replaces the whole input. */
  perturb(text: string): string {
    return text;
  }
}
