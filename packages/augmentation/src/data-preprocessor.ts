import { EVAL_SPLITS, TRAIN_SPLIT, type DataAugmenterSpec, type Instance } from '@flexhelm/core';
import { createDataAugmenter } from './data-augmenter.js';
import type { DataOptions } from './data-files.js';

/**
 * HELM 0.2.1's `DataPreprocessor`: returns the train instances, then the eval (valid and test) instances, each group
 * augmented if its flag says so. Instances of any other split are dropped, as in HELM.
 */
export class DataPreprocessor {
  constructor(
    readonly dataAugmenterSpec: DataAugmenterSpec,
    private readonly data: DataOptions = {},
  ) {}

  async preprocess(instances: readonly Instance[]): Promise<Instance[]> {
    const spec = this.dataAugmenterSpec;
    // HELM builds the augmenter (and so loads every perturbation's data) even when no group is augmented.
    const augmenter = await createDataAugmenter(spec, this.data);
    let train = instances.filter((inst) => inst.split === TRAIN_SPLIT);
    if (spec.should_augment_train_instances) {
      train = augmenter.generate(train, {
        includeOriginal: spec.should_include_original_train,
        skipUnchanged: spec.should_skip_unchanged_train,
        seedsPerInstance: spec.seeds_per_instance,
      });
    }
    let evaluation = instances.filter((inst) => (EVAL_SPLITS as readonly (string | undefined)[]).includes(inst.split));
    if (spec.should_augment_eval_instances) {
      evaluation = augmenter.generate(evaluation, {
        includeOriginal: spec.should_include_original_eval,
        skipUnchanged: spec.should_skip_unchanged_eval,
        seedsPerInstance: spec.seeds_per_instance,
      });
    }
    return [...train, ...evaluation];
  }
}
