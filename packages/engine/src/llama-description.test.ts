import { describe, expect, it } from 'vitest';
import { describeHfConfig, llamaDescriptionFromHf } from './llama-description.js';
import { ModelFileError } from './model-file-error.js';
import { descriptionByName } from './description-by-name.js';
import { optHfConfig } from './families/opt/opt-description.js';

const llama = {
  model_type: 'llama', vocab_size: 1000, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4,
  intermediate_size: 172, max_position_embeddings: 128, rms_norm_eps: 1e-6, rope_theta: 10000, rope_scaling: null, tie_word_embeddings: false,
};
const qwen2 = {
  model_type: 'qwen2', vocab_size: 1500, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 1,
  intermediate_size: 160, max_position_embeddings: 128, rms_norm_eps: 1e-6, rope_theta: 1e6, tie_word_embeddings: true, use_sliding_window: false, sliding_window: 4096,
};

function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('no error thrown');
}

describe('llamaDescriptionFromHf', () => {
  it('reads a Llama-2 style config', () => {
    const d = llamaDescriptionFromHf(llama);
    expect(d.family).toBe('llama');
    expect(d.norm).toEqual({ kind: 'rmsnorm', placement: 'pre', eps: 1e-6, final: true });
    expect(d.positions).toEqual({ kind: 'rope', theta: 10000 });
    expect(d.attention).toEqual({ heads: 4, kvHeads: 4, headDim: 16, bias: false });
    expect(d.mlp).toEqual({ kind: 'swiglu', intermediateSize: 172, bias: false });
    expect(d.checkpointNames?.head).toBe('lm_head.weight');
    expect(d.layerTensors.map((t) => t.checkpointSuffix)).toEqual([
      'input_layernorm.weight', 'self_attn.q_proj.weight', 'self_attn.k_proj.weight', 'self_attn.v_proj.weight', 'self_attn.o_proj.weight',
      'post_attention_layernorm.weight', 'mlp.gate_proj.weight', 'mlp.up_proj.weight', 'mlp.down_proj.weight',
    ]);
  });

  it('reads the llama3 rope_scaling of the conformance llama-b config', () => {
    // as in shared/conformance/llama/llama-b/f32/config.json
    const json = {
      ...llama, hidden_size: 64, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 8, max_position_embeddings: 256, rope_theta: 500000.0,
      rope_scaling: { factor: 8.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 256, rope_type: 'llama3' },
    };
    const d = llamaDescriptionFromHf(json);
    expect(d.positions).toEqual({ kind: 'rope', theta: 500000, scaling: { kind: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 256 } });
    expect(d.attention).toEqual({ heads: 8, kvHeads: 2, headDim: 8, bias: false });
  });

  it('qwen2: q/k/v biases (no o_proj bias), tied head, window off without use_sliding_window', () => {
    const d = llamaDescriptionFromHf(qwen2);
    expect(d.attention).toEqual({ heads: 4, kvHeads: 1, headDim: 16, bias: true });
    expect(d.embedding.tiedHead).toBe(true);
    expect(d.checkpointNames?.head).toBeUndefined();
    expect(d.layerTensors.filter((t) => t.key.endsWith('B')).map((t) => t.checkpointSuffix)).toEqual(['self_attn.q_proj.bias', 'self_attn.k_proj.bias', 'self_attn.v_proj.bias']);
    expect(llamaDescriptionFromHf({ ...qwen2, use_sliding_window: true, max_window_layers: 2 }).attention.slidingWindow).toBe(4096);
  });

  it('mistral: sliding_window; llama attention_bias adds o_proj bias too', () => {
    expect(llamaDescriptionFromHf({ ...llama, model_type: 'mistral', sliding_window: 8 }).attention.slidingWindow).toBe(8);
    expect(llamaDescriptionFromHf({ ...llama, sliding_window: 8 }).attention.slidingWindow).toBeUndefined();
    const biased = llamaDescriptionFromHf({ ...llama, attention_bias: true });
    expect(biased.layerTensors.filter((t) => t.key.endsWith('B')).map((t) => t.key)).toEqual(['qB', 'kB', 'vB', 'oB']);
  });

  it('linear, dynamic and the legacy "type" key', () => {
    expect(llamaDescriptionFromHf({ ...llama, rope_scaling: { type: 'linear', factor: 2 } }).positions).toEqual({ kind: 'rope', theta: 10000, scaling: { kind: 'linear', factor: 2 } });
    expect(llamaDescriptionFromHf({ ...llama, rope_scaling: { rope_type: 'dynamic', factor: 2 } }).positions).toEqual({ kind: 'rope', theta: 10000, scaling: { kind: 'dynamic', factor: 2, originalMaxPositions: 128 } });
    expect(llamaDescriptionFromHf({ ...llama, rope_scaling: { rope_type: 'default' } }).positions).toEqual({ kind: 'rope', theta: 10000 });
  });

  it('rejects unknown or unsupported settings with a ModelFileError naming the field', () => {
    const cases: [unknown, RegExp][] = [
      [{ ...llama, model_type: 'gpt2' }, /model_type is "gpt2"/],
      [{ ...llama, rope_scaling: { rope_type: 'yarn', factor: 4 } }, /rope_scaling\.rope_type is "yarn"; supported: default, linear, dynamic, llama3/],
      [{ ...llama, rope_scaling: { rope_type: 'linear' } }, /rope_scaling\.factor is undefined/],
      [{ ...llama, num_key_value_heads: 3 }, /num_attention_heads 4 is not a multiple of num_key_value_heads 3/],
      [{ ...llama, hidden_size: -1 }, /hidden_size is -1/],
      [{ ...llama, vocab_size: 1e9 }, /vocab_size is 1000000000; it must be an integer from 1 to/],
      [{ ...llama, hidden_act: 'gelu' }, /hidden_act is "gelu"/],
      [{ ...llama, rms_norm_eps: 0 }, /rms_norm_eps is 0/],
      [{ ...llama, bos_token_id: 5000 }, /bos_token_id is 5000/],
      [{ ...llama, model_type: 'mistral', sliding_window: 0 }, /sliding_window is 0/],
      [[], /is not a JSON object/],
    ];
    for (const [json, message] of cases) {
      const err = errorOf(() => llamaDescriptionFromHf(json, 'm/config.json'));
      expect(err).toBeInstanceOf(ModelFileError);
      expect(err.message).toMatch(/^m\/config\.json: /);
      expect(err.message).toMatch(message);
    }
  });
});

describe('llamaDescriptionFromHf and the other families', () => {
  const tiny = { vocab_size: 10, hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 4, intermediate_size: 16, max_position_embeddings: 32 };

  it('refuses a family whose layer holds more than Llama\'s tensors, naming them (decided from the description)', () => {
    expect(() => llamaDescriptionFromHf({ ...tiny, model_type: 'gemma2' }, 'g/config.json')).toThrow(/^g\/config\.json: model_type is "gemma2", whose layer is not Llama's \(it holds [a-zA-Z, ]*attnOutNormW[a-zA-Z, ]*\); describeHfConfig reads it$/);
    expect(() => llamaDescriptionFromHf({ ...tiny, model_type: 'olmo2' })).toThrow(/model_type is "olmo2", whose layer is not Llama's \(it holds [a-zA-Z, ]*qNormW/);
    expect(() => llamaDescriptionFromHf(optHfConfig(descriptionByName('opt-125m'), 'float16'))).toThrow(/model_type is "opt", whose layer is not Llama's \(it holds [a-zA-Z, ]*ln1W/);
    const err = errorOf(() => llamaDescriptionFromHf({ ...tiny, model_type: 'mixtral', num_local_experts: 4, num_experts_per_tok: 2 }));
    expect(err).toBeInstanceOf(ModelFileError);
    expect(err.message).toMatch(/model_type is "mixtral", whose layer is not Llama's/);
  });

  it('takes Phi-3, whose fused checkpoint tensors split into exactly a Llama layer', () => {
    const d = llamaDescriptionFromHf({ ...tiny, model_type: 'phi3', num_key_value_heads: 2, head_dim: undefined });
    expect(d.family).toBe('phi3');
    expect(d.layerTensors.map((t) => t.key)).toEqual(expect.arrayContaining(['qW', 'kW', 'vW', 'gateW', 'upW']));
  });
});

describe('describeHfConfig', () => {
  it('dispatches by model_type and leaves OPT as optDescription makes it', () => {
    const d = descriptionByName('opt-125m');
    expect(describeHfConfig(optHfConfig(d, 'float16'))).toEqual(d);
    expect(describeHfConfig(qwen2).family).toBe('qwen2');
    expect(errorOf(() => describeHfConfig({ model_type: 'falcon' }))).toBeInstanceOf(ModelFileError);
    expect(errorOf(() => describeHfConfig({ model_type: 'falcon' })).message).toMatch(/model_type is "falcon"; supported: opt, llama, mistral, qwen2/);
  });
});
