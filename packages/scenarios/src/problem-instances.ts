import { CORRECT_TAG, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';

/** One generated problem: the input text and its single correct answer. */
export interface Problem {
  input: string;
  target: string;
}

/**
 * The layout of HELM's generated reasoning scenarios: `numTrain` train, then `numValid` valid, then `numTest` test
 * problems, drawn in that order, each with one reference tagged correct.
 */
export function problemInstances(numTrain: number, numValid: number, numTest: number, makeProblem: () => Problem): Instance[] {
  const instances: Instance[] = [];
  for (let idx = 0; idx < numTrain + numValid + numTest; idx++) {
    const { input, target } = makeProblem();
    const split = idx < numTrain ? TRAIN_SPLIT : idx < numTrain + numValid ? VALID_SPLIT : TEST_SPLIT;
    instances.push(instance({ input: { text: input }, references: [reference(target, [CORRECT_TAG])], split }));
  }
  return instances;
}
