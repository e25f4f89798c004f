import { NumpyRandomState } from '@flexhelm/python-compat';
import { EVAL_SPLITS, HelmError, TRAIN_SPLIT, type Instance } from '@flexhelm/core';

/**
 * HELM's `Adapter.get_run_instances`: every train instance (in order), then the eval (valid/test) instances — all of
 * them, or when there are more than `maxEvalInstances`, the first `maxEvalInstances` of a numpy `seed(0)` permutation,
 * in permutation order (not re-sorted).
 */
export function getRunInstances(instances: readonly Instance[], maxEvalInstances?: number | null): Instance[] {
  const train = instances.filter((inst) => inst.split === TRAIN_SPLIT);
  const evalInstances = instances.filter((inst) => (EVAL_SPLITS as readonly (string | undefined)[]).includes(inst.split));
  if (maxEvalInstances === undefined || maxEvalInstances === null || evalInstances.length <= maxEvalInstances) {
    return [...train, ...evalInstances];
  }
  if (!Number.isInteger(maxEvalInstances) || maxEvalInstances < 0) {
    throw new HelmError('ValueError', `max_eval_instances=${maxEvalInstances}: it must be a non-negative integer (or None for all eval instances).`);
  }
  const order = new NumpyRandomState(0).permutation(evalInstances.length) as number[];
  return [...train, ...order.slice(0, maxEvalInstances).map((i) => evalInstances[i]!)] // a permutation of the indices;
}
