import { TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT } from '@flexhelm/core';

/** The split of the `index`-th generated problem: the first `numTrain` are train, the next `numValid` valid, the rest test. */
export function splitForIndex(index: number, numTrain: number, numValid: number): string {
  if (index < numTrain) return TRAIN_SPLIT;
  if (index < numTrain + numValid) return VALID_SPLIT;
  return TEST_SPLIT;
}
