import { describe, expect, it } from 'vitest';
import { descriptionByName } from './description-by-name.js';
import { optHfConfig } from './families/opt/opt-description.js';
import { describeHfConfig } from './families/registry.js';
import { resolveHubConfig } from './make-hub-model.js';

describe('descriptionByName', () => {
  it('names a published OPT size as OPT config.json describes it (organisation prefix, case and iml sizes too)', () => {
    const d = descriptionByName('opt-1.3b');
    expect([d.family, d.layers, d.hiddenSize, d.attention.heads, d.mlp.intermediateSize, d.vocabSize, d.maxPositions]).toEqual(['opt', 24, 2048, 32, 8192, 50272, 2048]);
    expect(describeHfConfig(optHfConfig(d, 'float16'))).toEqual(d);
    expect(descriptionByName('facebook/OPT-IML-MAX-30b')).toEqual({ ...descriptionByName('opt-30b'), name: 'opt-iml-max-30b' });
    // opt-350m: post-LN, and a 512-wide embedding projected in and out.
    const small = descriptionByName('opt-350m');
    expect([small.norm.placement, small.norm.final, small.embedding.dim]).toEqual(['post', false, 512]);
  });

  it('names a make-model base of another family as its published config.json', () => {
    expect(descriptionByName('llama-3.2-1b')).toEqual(describeHfConfig(resolveHubConfig('llama-3.2-1b').hf, 'llama-3.2-1b'));
    expect(descriptionByName('qwen2-0.5b').family).toBe('qwen2');
  });

  it('refuses an unknown name listing the known ones; an OPT size that does not exist keeps OPT\'s message', () => {
    expect(() => descriptionByName('gpt2')).toThrow(/^unknown model "gpt2"; known names: .*llama-3\.2-1b.*opt-125m/);
    expect(() => descriptionByName('opt-7b')).toThrow(/^unknown OPT model "opt-7b"; known names: opt-125m/);
    expect(() => descriptionByName('opt-iml-2.7b')).toThrow(/opt-iml and opt-iml-max exist only in sizes 1\.3b, 30b/);
  });
});
