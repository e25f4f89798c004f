import { hasFastIsa, oneDnnStatus, type ComputeDtype as OneDnnDtype } from '@flexhelm/onednn-backend';
import type { ModelShape } from '@flexhelm/offload';
import { backendProfile, type ComputePath, type MachineProfile } from '@flexhelm/policy-search';

/** `--compute-dtype`: a oneDNN dtype, or `auto` (the fastest one that passes the accuracy gate). The one such type. */
export type ComputeDtype = OneDnnDtype | 'auto';
export const COMPUTE_DTYPES: readonly ComputeDtype[] = ['auto', 'fp32', 'bf16', 'int8'];

export function isComputeDtype(value: unknown): value is ComputeDtype {
  return COMPUTE_DTYPES.includes(value as ComputeDtype);
}

/** The environment switch that opts in to `--compute-dtype int8`, which fails the accuracy gate on OPT-125m shapes. */
export const EXPERIMENTAL_INT8_ENV = 'FLEXHELM_EXPERIMENTAL_INT8';

/**
 * Why `dtype` may not be used here, or undefined when it may: int8 is experimental (onednn-backend's accuracy table)
 * and runs only when FLEXHELM_EXPERIMENTAL_INT8=1 says the user knows its logprobs differ.
 */
export function computeDtypeRefusal(dtype: unknown, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!isComputeDtype(dtype)) return `--compute-dtype takes ${COMPUTE_DTYPES.slice(0, -1).join(', ')} or ${COMPUTE_DTYPES.at(-1)}, got '${String(dtype)}'`;
  if (dtype === 'int8' && env[EXPERIMENTAL_INT8_ENV] !== '1') {
    return `--compute-dtype int8 is experimental (its logprobs fail the accuracy gate); set ${EXPERIMENTAL_INT8_ENV}=1 to opt in, or use bf16`;
  }
  return undefined;
}

/** Whether oneDNN can compute here, and if not why (the addon or libdnnl is missing, or the CPU gains nothing). */
export type OneDnnUsability = { usable: true } | { usable: false; reason: string };

export function oneDnnUsability(): OneDnnUsability {
  const status = oneDnnStatus();
  if (!status.available) return { usable: false, reason: `oneDNN is unavailable: ${status.reason}` };
  const isa = hasFastIsa(status.features);
  if (!isa.fast) return { usable: false, reason: `this CPU offers oneDNN only ${isa.what} (no AMX or AVX-512), where it is no faster` };
  return { usable: true };
}

export interface BackendDecision {
  library: 'onednn' | 'onnxruntime';
  /** The dtype asked of oneDNN (`auto` runs its first-batch gate); onnxruntime always computes fp32. */
  dtype: ComputeDtype;
  /** True when `auto` skips the gate because streamed layers are not all resident. */
  streamedAuto: boolean;
}

/**
 * The backend a --compute-dtype computes on: fp32 on onnxruntime; anything else on oneDNN where it is usable. With
 * streamed (offloaded) layers `auto` means bf16, since the first-batch gate needs every layer resident. Both the cost
 * model (`costPathFor`) and `openEngine` follow this decision, so the search predicts what the engine runs.
 */
export function decideBackend(computeDtype: ComputeDtype, o: { allResident: boolean; onednn: OneDnnUsability }): BackendDecision {
  const streamedAuto = computeDtype === 'auto' && !o.allResident;
  const dtype = streamedAuto ? 'bf16' : computeDtype;
  return { library: dtype === 'fp32' || !o.onednn.usable ? 'onnxruntime' : 'onednn', dtype, streamedAuto };
}

/**
 * The cost model's compute path for `decideBackend`'s choice: oneDNN runs are predicted from the profile's oneDNN
 * measurements (bf16, the only oneDNN path profiled; int8 is closer to it than to onnxruntime fp32), onnxruntime runs
 * and unprofiled oneDNN from onnxruntime's.
 */
export function costPathFor(computeDtype: ComputeDtype, profile: MachineProfile, onednn: OneDnnUsability = oneDnnUsability(), shape?: ModelShape): ComputePath {
  // Whether layers stream does not change the library, only the oneDNN dtype: any residency gives the same path.
  const decision = decideBackend(computeDtype, { allResident: true, onednn });
  // The model's own shape decides where it is known: a family oneDNN does not compute has no oneDNN figures (its runs
  // fall back to onnxruntime or the reference backend, which the fp32 figures time), though other shapes may.
  const profiled = shape ? hasFigures(profile, shape, 'onednn-bf16') : Object.values(profile.shapes)[0]?.backends['onednn-bf16'] !== undefined;
  return decision.library === 'onednn' && profiled ? 'onednn-bf16' : 'onnxruntime-fp32';
}

function hasFigures(profile: MachineProfile, shape: ModelShape, backend: ComputePath): boolean {
  try {
    backendProfile(profile, shape, backend);
    return true;
  } catch {
    return false;
  }
}
