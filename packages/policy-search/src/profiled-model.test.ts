import { describe, expect, it } from 'vitest';
import { describeHfConfig, expertOfTensor, resolveHubConfig } from '@flexhelm/engine';
import { profileDescription, profileExperts, toShapeKey } from './profiled-model.js';

const describe_ = (base: string) => describeHfConfig(resolveHubConfig(base).hf, base);

describe('profileDescription of a mixture of experts', () => {
  it("cuts Qwen1.5-MoE-A2.7B's 60 experts to 8 (router, expert tensors and all), keeping everything else", () => {
    const d = describe_('qwen1.5-moe-a2.7b');
    expect(d.moe!.experts).toBe(60);
    expect(profileExperts(d.moe!)).toBe(8);
    const p = profileDescription(d, 2);
    expect(p.moe).toEqual({ ...d.moe, experts: 8 });
    expect(p.layerTensors.find((t) => t.key === 'routerW')!.shape).toEqual([d.hiddenSize, 8]);
    const experts = new Set(p.layerTensors.map((t) => expertOfTensor(t.key)).filter((e) => e !== undefined));
    expect([...experts].sort((a, b) => a! - b!)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // The dense part (attention, norms, shared expert and its gate) is the model's own.
    const dense = (x: typeof d) => x.layerTensors.filter((t) => expertOfTensor(t.key) === undefined && t.key !== 'routerW');
    expect(dense(p)).toEqual(dense(d));
    expect(p.layers).toBe(2);
    // The profile is still cached under the full model's shape.
    expect(toShapeKey(d)).not.toEqual(toShapeKey(p));
  });

  it("keeps Mixtral's 8 experts (top 2) as they are", () => {
    const d = describe_('mixtral-8x7b');
    const p = profileDescription(d, 2);
    expect(p.moe).toEqual(d.moe);
    expect(p.layerTensors).toEqual(d.layerTensors);
  });
});
