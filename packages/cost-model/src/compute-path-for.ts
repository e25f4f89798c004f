import type { MachineProfile } from './machine-profile.js';
import type { ComputePath } from './predict-cost.js';

/**
 * The cost path of a --compute-dtype: oneDNN (profiled as bf16) for auto, bf16 and int8 where it was profiled, as
 * `@flexhelm/session`'s `decideBackend` (what openEngine uses) runs them — int8 computes on oneDNN, not onnxruntime,
 * and is predicted from the bf16 profile.
 */
export function computePathFor(computeDtype: string | undefined, profile: MachineProfile): ComputePath {
  if (computeDtype === 'fp32') return 'onnxruntime-fp32';
  const any = Object.values(profile.shapes)[0];
  return any?.backends['onednn-bf16'] ? 'onednn-bf16' : 'onnxruntime-fp32';
}
