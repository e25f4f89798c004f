import { describe, expect, it } from 'vitest';
import { resolveHubConfig, describeHfConfig } from '@flexhelm/engine';
import { modelShapeOfDescription } from '@flexhelm/offload';
import { computePathFor, shapeId, shapeKeyOf, type MachineProfile } from '@flexhelm/policy-search';
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

  it("takes the model's own shape: a family oneDNN does not compute has no oneDNN figures though other shapes do", () => {
    const tiny = { hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 128, vocab_size: 1024 };
    const shape = (base: string) => modelShapeOfDescription(describeHfConfig(resolveHubConfig({ base, ...tiny }).hf));
    const llama = shape('llama-3.2-1b');
    const gemma = shape('gemma-2-2b');
    const id = (s: typeof llama) => shapeId(shapeKeyOf(s));
    const profile = { shapes: { [id(llama)]: { backends: { 'onnxruntime-fp32': {}, 'onednn-bf16': {} } }, [id(gemma)]: { backends: { 'onnxruntime-fp32': {} } } } } as unknown as MachineProfile;
    expect(id(llama)).not.toBe(id(gemma));
    expect(costPathFor('auto', profile, usable, llama)).toBe('onednn-bf16');
    expect(costPathFor('auto', profile, usable, gemma)).toBe('onnxruntime-fp32');
    expect(costPathFor('fp32', profile, usable, llama)).toBe('onnxruntime-fp32');
  });
});
