import type { DataAugmenterSpec, Instance } from '@flexhelm/core';
import { createPerturbation } from './create-perturbation.js';
import type { DataOptions } from './data-files.js';
import { inputsEqual } from './input-equality.js';
import type { Perturbation } from './perturbation.js';

export interface GenerateOptions {
  /** Keep each original instance ahead of its perturbed copies (default true). */
  includeOriginal?: boolean;
  /** Drop a perturbed copy whose input equals the original's (Python `==`, see {@link inputsEqual}); default false. */
  skipUnchanged?: boolean;
  /** Apply each perturbation with seeds None, 1, 2, … (default 1: seed None only). */
  seedsPerInstance?: number;
}

/** HELM 0.2.1's `DataAugmenter`: expands instances with their perturbed copies. */
export class DataAugmenter {
  constructor(readonly perturbations: readonly Perturbation[]) {}

  /** Per instance, in order: the original (if included), then for each perturbation its copies for each seed. */
  generate(instances: readonly Instance[], options: GenerateOptions = {}): Instance[] {
    const { includeOriginal = true, skipUnchanged = false, seedsPerInstance = 1 } = options;
    const out: Instance[] = [];
    for (const inst of instances) {
      if (includeOriginal) out.push(inst);
      for (const perturbation of this.perturbations) {
        for (let i = 0; i < seedsPerInstance; i++) {
          const perturbed = perturbation.apply(inst, i === 0 ? undefined : i);
          if (skipUnchanged && inputsEqual(perturbed.input, inst.input)) continue;
          out.push(perturbed);
        }
      }
    }
    return out;
  }
}

/** `create_data_augmenter(spec)`: builds every perturbation of the spec (loading their data) in order. */
export async function createDataAugmenter(spec: DataAugmenterSpec, data: DataOptions = {}): Promise<DataAugmenter> {
  const perturbations: Perturbation[] = [];
  for (const perturbationSpec of spec.perturbation_specs) perturbations.push(await createPerturbation(perturbationSpec, data));
  return new DataAugmenter(perturbations);
}
