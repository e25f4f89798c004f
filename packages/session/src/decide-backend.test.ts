import { describe, expect, it } from 'vitest';
import { computePathFor, type MachineProfile } from '@flexhelm/policy-search';
import { COMPUTE_DTYPES, costPathFor, decideBackend, type OneDnnUsability } from './decide-backend.js';

/** Just the part of a profile the compute path depends on: which backends were measured. */
const profileWith = (backends: string[]): MachineProfile => ({ shapes: { s: { backends: Object.fromEntries(backends.map((b) => [b, {}])) } } }) as unknown as MachineProfile;
const usable: OneDnnUsability = { usable: true };
const unusable: OneDnnUsability = { usable: false, reason: 'test' };

describe('decideBackend', () => {
  it('runs fp32 on onnxruntime and the others on oneDNN where it is usable; auto with streamed layers is bf16', () => {
    expect(COMPUTE_DTYPES.map((d) => decideBackend(d, { allResident: true, onednn: usable }))).toEqual([
      { library: 'onednn', dtype: 'auto', streamedAuto: false },
      { library: 'onnxruntime', dtype: 'fp32', streamedAuto: false },
      { library: 'onednn', dtype: 'bf16', streamedAuto: false },
      { library: 'onednn', dtype: 'int8', streamedAuto: false },
    ]);
    expect(decideBackend('auto', { allResident: false, onednn: usable })).toEqual({ library: 'onednn', dtype: 'bf16', streamedAuto: true });
    for (const d of COMPUTE_DTYPES) expect(decideBackend(d, { allResident: false, onednn: unusable }).library).toBe('onnxruntime');
  });

  it('gives the cost model the path the engine runs, for every dtype (int8 included: it runs on oneDNN)', () => {
    const profiled = profileWith(['onnxruntime-fp32', 'onednn-bf16']);
    expect(COMPUTE_DTYPES.map((d) => costPathFor(d, profiled, usable))).toEqual(['onednn-bf16', 'onnxruntime-fp32', 'onednn-bf16', 'onednn-bf16']);
    // policy-search's own helper agrees wherever oneDNN was profiled (it was profiled only where it is usable).
    for (const d of COMPUTE_DTYPES) expect(computePathFor(d, profiled)).toBe(costPathFor(d, profiled, usable));
    const ortOnly = profileWith(['onnxruntime-fp32']);
    for (const d of COMPUTE_DTYPES) {
      expect(costPathFor(d, ortOnly, unusable)).toBe('onnxruntime-fp32');
      expect(computePathFor(d, ortOnly)).toBe('onnxruntime-fp32');
    }
  });
});
