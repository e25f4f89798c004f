import { HelmError } from './helm-error.js';

/** numpy's seed range check: `np.random.seed` and `RandomState` reject anything outside [0, 2**32). */
export function checkNumpySeed(seed: number, argName: string): void {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new HelmError('ValueError', `${argName}=${seed}: a numpy seed must be an integer between 0 and 2**32 - 1.`);
  }
}
