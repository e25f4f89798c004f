import { describe, expect, it } from 'vitest';
import { llamaDescriptionFromHf } from '../../llama-description.js';
import { describeHfConfig } from '../registry.js';
import { isOptShaped, kvValuesPerToken } from '@flexhelm/contract';
import { optConfigOfDescription, optDescription } from './opt-description.js';
import { knownOptNames, optConfigByName } from './opt-config.js';
import { optTensorShapes } from './opt-weights.js';

describe('optDescription', () => {
  it('names every decoder-layer tensor of the checkpoint once, with its transposed shape and layer object', () => {
    const c = optConfigByName('opt-1.3b');
    const d = optDescription(c);
    const expected = optTensorShapes(c);
    const layer0 = [...expected.keys()].filter((n) => n.startsWith('decoder.layers.0.'));
    expect(d.layerTensors.map((t) => `decoder.layers.0.${t.checkpointSuffix}`).sort()).toEqual(layer0.sort());
    for (const t of d.layerTensors) {
      const shape = expected.get(`decoder.layers.0.${t.checkpointSuffix}`)!;
      // Linear weights are [out, in] in the checkpoint, [in, out] in the description.
      expect(t.shape).toEqual(shape.length === 2 ? [shape[1], shape[0]] : shape);
    }
    expect(d.layerTensors.filter((t) => t.group === 'attention').map((t) => t.key)).toEqual(['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'ln1W', 'ln1B']);
    expect(d.layerTensors.filter((t) => t.group === 'mlp').map((t) => t.key)).toEqual(['fc1W', 'fc1B', 'fc2W', 'fc2B', 'ln2W', 'ln2B']);
  });

  it("describes OPT's blocks: learned positions after 2 rows, LayerNorm, ReLU, tied head, one KV head per head", () => {
    const d = optDescription(optConfigByName('opt-1.3b'));
    expect(d.positions).toEqual({ kind: 'learned', offset: 2 });
    expect(d.norm).toEqual({ kind: 'layernorm', placement: 'pre', eps: 1e-5, final: true });
    expect(d.mlp).toEqual({ kind: 'relu', intermediateSize: 8192, bias: true });
    expect(d.attention).toEqual({ heads: 32, kvHeads: 32, headDim: 64, bias: true });
    expect(d.embedding).toEqual({ dim: 2048, tiedHead: true });
    expect(kvValuesPerToken(d)).toBe(2 * 2048);
    const small = optDescription(optConfigByName('opt-350m'));
    expect(small.norm.placement).toBe('post');
    expect(small.norm.final).toBe(false);
    expect(small.embedding.dim).toBe(512);
  });
});

describe('optConfigOfDescription', () => {
  it('gives back exactly the OPT config a description was made from (what OPT\'s reader and kernels read)', () => {
    for (const name of knownOptNames()) expect(optConfigOfDescription(optDescription(optConfigByName(name)), 'test')).toEqual(optConfigByName(name));
  });

  it('refuses another family, naming the caller and the family', () => {
    const d = llamaDescriptionFromHf({ model_type: 'mistral', _name_or_path: 'm', vocab_size: 10, hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 16, max_position_embeddings: 32 });
    expect(() => optConfigOfDescription(d, 'OptWeights')).toThrow('OptWeights takes OPT-shaped models only (learned positions, LayerNorm, ReLU MLP); m is a mistral model');
  });
});

describe('isOptShaped', () => {
  const tiny = { vocab_size: 10, hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 4, intermediate_size: 16, max_position_embeddings: 32 };

  it('holds for every OPT description and for no rotary family: the OPT path is chosen by kinds, not the name', () => {
    for (const name of knownOptNames()) expect(isOptShaped(optDescription(optConfigByName(name)))).toBe(true);
    for (const modelType of ['llama', 'mistral', 'qwen2', 'gemma2', 'phi3', 'olmo2']) expect(isOptShaped(describeHfConfig({ ...tiny, model_type: modelType })), modelType).toBe(false);
  });

  it('needs all three of OPT\'s kinds: learned positions with RMSNorm or a GELU MLP is not what the OPT path computes', () => {
    const opt = optDescription(optConfigByName('opt-125m'));
    expect(isOptShaped({ ...opt, norm: { ...opt.norm, kind: 'rmsnorm' } })).toBe(false);
    expect(isOptShaped({ ...opt, mlp: { ...opt.mlp, kind: 'gelu' } })).toBe(false);
    // The name plays no part: a description under another name with OPT's kinds is computed as OPT.
    expect(isOptShaped({ ...opt, family: 'my-opt' })).toBe(true);
  });
});
