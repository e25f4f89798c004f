import type { MachineProfile } from './machine-profile.js';
import type { ComputePath } from './predict-cost.js';

/** The backend openEngine computes with for a --compute-dtype: oneDNN bf16 for auto/bf16 where it is usable (and profiled). */
export function computePathFor(computeDtype: string | undefined, profile: MachineProfile): ComputePath {
  if (computeDtype === 'fp32' || computeDtype === 'int8') return 'onnxruntime-fp32';
  const any = Object.values(profile.shapes)[0];
  return any?.backends['onednn-bf16'] ? 'onednn-bf16' : 'onnxruntime-fp32';
}
