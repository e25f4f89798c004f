import { PythonRandom } from '@flexhelm/python-compat';
import { HelmError, instance as makeInstance, perturbationDescription, type Instance, type PerturbationDescription, type Reference } from '@flexhelm/core';

/**
 * HELM 0.2.1's `Perturbation`: turns an Instance into a perturbed copy. The input (and, when
 * `shouldPerturbReferences`, every reference first) goes through `perturb` with one generator seeded from the
 * instance id (and the seed), and the copy is tagged with `description` carrying that seed.
 */
export abstract class Perturbation {
  /** HELM's `name` (the `perturbation.name` written to every output). */
  abstract readonly name: string;
  readonly shouldPerturbReferences: boolean = false;

  /** `PerturbationDescription` (or the subclass's Description) with its fields in HELM's order. */
  get description(): PerturbationDescription {
    return perturbationDescription(this.name);
  }

  /** `Random(instance.id)`, or `Random(str(seed) + instance.id)` when a seed is given. */
  getRng(inst: Instance, seed?: number): PythonRandom {
    if (inst.id === undefined) {
      throw new HelmError('AssertionError', `${this.constructor.name} needs instance ids to seed its random draws; give instances ids first (withInstanceIds).`);
    }
    return new PythonRandom(seed === undefined ? inst.id : String(seed) + inst.id);
  }

  apply(inst: Instance, seed?: number): Instance {
    const rng = this.getRng(inst, seed);
    const references = this.shouldPerturbReferences ? inst.references.map((ref) => this.perturbReference(ref, rng)) : inst.references;
    const perturbation = withSeed(this.description, seed);
    // The id stays: every perturbed copy of an instance shares its id.
    return makeInstance({ ...inst, input: { text: this.perturb(inst.input.text, rng) }, references, perturbation });
  }

  perturbReference(ref: Reference, rng: PythonRandom): Reference {
    return { output: { text: this.perturb(ref.output.text, rng) }, tags: ref.tags };
  }

  abstract perturb(text: string, rng: PythonRandom): string;
}

/** `dataclasses.replace(description, seed=seed)`: `seed` sits among the base fields, before a subclass's own. */
export function withSeed(description: PerturbationDescription, seed: number | undefined): PerturbationDescription {
  const { name, ...fields } = description;
  return perturbationDescription(name, { ...fields, seed });
}

/** Checks HELM's `assert 0 <= prob <= 1`. */
export function checkProbability(owner: string, prob: number): void {
  if (!(prob >= 0 && prob <= 1)) {
    throw new HelmError('AssertionError', `${owner}: prob must be between 0 and 1 (got ${prob}).`);
  }
}

/**
 * HELM looks a matched word up as written, then lower-cased; a case-insensitive match that neither finds (e.g. with
 * a long s "ſ") makes Python fail with AttributeError on None. flexhelm fails the same way, with an explanation.
 */
export function unmatchedCase(word: string): HelmError {
  return new HelmError('Exception', `AttributeError: "${word}" matched case-insensitively but neither it nor its lower case is a key of the word map (HELM 0.2.1 fails here too).`);
}
