/**
 * Hugging Face `config.json` → `ModelDescription` for the Llama family (Llama 2/3, Mistral, Qwen2), as transformers
 * 4.47.1 reads these configs: RMSNorm (pre-norm, final norm), rotary positions with `rope_theta`/`rope_scaling`,
 * grouped-query attention, SwiGLU MLP, tied or untied head. OPT configs go through `optConfigFromHf`.
 */
import { ropeInvFreq } from './rope-inv-freq.js';
import { ModelFileError } from './model-file-error.js';
import { optDescription, type LayerTensorSpec, type ModelDescription, type RopeScaling } from './model-description.js';
import { MAX_TENSOR_ELEMENTS, optConfigFromHf } from './opt-config.js';
import { readConfigJson } from './read-model-text.js';

/** The keys of a Llama-family decoder layer's tensors. */
export type LlamaLayerTensorKey = 'qW' | 'qB' | 'kW' | 'kB' | 'vW' | 'vB' | 'oW' | 'oB' | 'inNormW' | 'postNormW' | 'gateW' | 'gateB' | 'upW' | 'upB' | 'downW' | 'downB';

/** A Llama-family description (token ids may be unset: configs often leave `pad_token_id` out). */
export interface LlamaDescription extends ModelDescription<LlamaLayerTensorKey> {
  family: 'llama' | 'mistral' | 'qwen2';
}

const FAMILIES = ['llama', 'mistral', 'qwen2'] as const;

/** Bounds like `checkOptConfig`'s: generous for real checkpoints, small enough to reject nonsense before allocating. */
const LIMITS = {
  vocab_size: 1_048_576,
  hidden_size: 65_536,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  intermediate_size: 262_144,
  max_position_embeddings: 16_777_216,
} as const;

/** Parses a Llama/Mistral/Qwen2 `config.json` object; `source` names the file in errors. */
export function llamaDescriptionFromHf(json: unknown, source = 'config.json'): LlamaDescription {
  const fail = (message: string) => new ModelFileError(`${source}: ${message}`);
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw fail('is not a JSON object');
  const c = json as Record<string, unknown>;
  const family = c.model_type;
  if (!FAMILIES.includes(family as never)) throw fail(`model_type is ${JSON.stringify(family)}; this reads ${FAMILIES.join(', ')}`);
  const fam = family as LlamaDescription['family'];
  const int = (key: string, max: number, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) throw fail(`${key} is ${JSON.stringify(c[key])}; it must be an integer from 1 to ${max}`);
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'boolean') throw fail(`${key} is ${JSON.stringify(v)}; it must be true or false`);
    return v;
  };
  const positive = (key: string, fallback: number, max = Infinity): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !(v > 0) || !(v <= max)) throw fail(`${key} is ${JSON.stringify(v)}; it must be a number above 0${max < Infinity ? ` and at most ${max}` : ''}`);
    return v;
  };
  const vocab = int('vocab_size', LIMITS.vocab_size);
  const H = int('hidden_size', LIMITS.hidden_size);
  const layers = int('num_hidden_layers', LIMITS.num_hidden_layers);
  const heads = int('num_attention_heads', LIMITS.num_attention_heads);
  const kvHeads = int('num_key_value_heads', heads, heads);
  if (heads % kvHeads !== 0) throw fail(`num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
  if (c.head_dim === undefined && H % heads !== 0) throw fail(`hidden_size ${H} is not divisible by num_attention_heads ${heads}; set head_dim`);
  // qwen2 has no head_dim field in 4.47.1; llama/mistral default to hidden_size / heads.
  const hd = fam === 'qwen2' ? H / heads : int('head_dim', 65_536, Math.floor(H / heads));
  if (!Number.isInteger(hd)) throw fail(`hidden_size ${H} is not divisible by num_attention_heads ${heads}`);
  if (hd % 2 !== 0) throw fail(`head_dim ${hd} is odd; rotary embeddings pair dimension i with i + head_dim/2`);
  const I = int('intermediate_size', LIMITS.intermediate_size);
  const maxPositions = int('max_position_embeddings', LIMITS.max_position_embeddings);
  const eps = positive('rms_norm_eps', 1e-6, 1);
  // The kernels add eps in float32: one that rounds to 0 there divides a zero row by zero.
  if (!(Math.fround(eps) > 0)) throw fail(`rms_norm_eps is ${JSON.stringify(eps)}, which is 0 in float32; it must be at least ${Math.fround(1.401298464324817e-45)}`);
  const theta = positive('rope_theta', 10000);
  const act = c.hidden_act ?? 'silu';
  if (act !== 'silu') throw fail(`hidden_act is ${JSON.stringify(act)}; only "silu" (SwiGLU) is implemented`);
  if (c.partial_rotary_factor !== undefined && c.partial_rotary_factor !== 1) throw fail(`partial_rotary_factor ${JSON.stringify(c.partial_rotary_factor)} is not supported (only 1)`);
  // Biases: llama has attention_bias (q/k/v/o) and mlp_bias; qwen2 always q/k/v, never o or MLP.
  const attnBias = fam === 'qwen2' ? true : fam === 'llama' ? bool('attention_bias', false) : false;
  const mlpBias = fam === 'llama' ? bool('mlp_bias', false) : false;
  // Llama's attention_bias also gives o_proj a bias; qwen2's o_proj has none.
  const outBias = fam === 'llama' && attnBias;
  const tied = bool('tie_word_embeddings', fam === 'qwen2');
  let slidingWindow: number | undefined;
  const window = c.sliding_window;
  const windowUsed = fam === 'mistral' || (fam === 'qwen2' && bool('use_sliding_window', false));
  if (windowUsed && window !== null && window !== undefined) {
    if (typeof window !== 'number' || !Number.isInteger(window) || window < 1) throw fail(`sliding_window is ${JSON.stringify(window)}; it must be a positive integer or null`);
    if (fam === 'qwen2' && c.max_window_layers !== undefined && c.max_window_layers !== layers) {
      throw fail('use_sliding_window with max_window_layers below num_hidden_layers (a window on some layers only) is not implemented');
    }
    slidingWindow = window;
  }
  const scaling = ropeScalingFromHf(c.rope_scaling, maxPositions, fail);
  // What the kernels derive from rope_theta and rope_scaling must be finite (theta 1e-300 is 0 in float32: 1/0^x).
  const invFreq = ropeInvFreq(hd, theta, scaling, maxPositions);
  const badFreq = invFreq.findIndex((f) => !(Number.isFinite(f) && f > 0));
  if (badFreq >= 0) {
    throw fail(`rope_theta ${JSON.stringify(theta)}${scaling ? ' with its rope_scaling' : ''} gives the rotary inverse frequency ${invFreq[badFreq]} for dimension pair ${badFreq}; it must be a number whose frequencies are finite and above 0 in float32 (Llama uses 10000 to 500000)`);
  }
  const tensors: [string, number][] = [['embed_tokens (vocab_size × hidden_size)', vocab * H], ['gate_proj (intermediate_size × hidden_size)', I * H], ['q_proj', heads * hd * H]];
  for (const [what, n] of tensors) if (n > MAX_TENSOR_ELEMENTS) throw fail(`the ${what} tensor would hold ${n} values, more than the ${MAX_TENSOR_ELEMENTS} one tensor may hold`);
  const tokenId = (key: string): number | undefined => {
    const v = c[key];
    const check = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < vocab;
    if (v === undefined || v === null) return undefined;
    // A list (Llama 3.1's eos ids): every entry must be a token id; the description keeps a single id only.
    if (Array.isArray(v)) {
      const bad = v.find((x) => !check(x));
      if (bad !== undefined || v.length === 0) throw fail(`${key} is ${JSON.stringify(v)}; every entry must be a token id from 0 to ${vocab - 1}`);
      return undefined;
    }
    if (!check(v)) throw fail(`${key} is ${JSON.stringify(v)}; it must be a token id from 0 to ${vocab - 1}`);
    return v;
  };
  const Q = heads * hd;
  const KV = kvHeads * hd;
  // Shapes in the backends' `[in, out]` layout (like OPT's description); checkpoints hold `[out, in]`.
  const a = (key: LlamaLayerTensorKey, shape: number[], checkpointSuffix: string): LayerTensorSpec<LlamaLayerTensorKey> => ({ key, shape, group: 'attention', checkpointSuffix });
  const m = (key: LlamaLayerTensorKey, shape: number[], checkpointSuffix: string): LayerTensorSpec<LlamaLayerTensorKey> => ({ key, shape, group: 'mlp', checkpointSuffix });
  const layerTensors = [
    a('inNormW', [H], 'input_layernorm.weight'),
    a('qW', [H, Q], 'self_attn.q_proj.weight'),
    ...(attnBias ? [a('qB', [Q], 'self_attn.q_proj.bias')] : []),
    a('kW', [H, KV], 'self_attn.k_proj.weight'),
    ...(attnBias ? [a('kB', [KV], 'self_attn.k_proj.bias')] : []),
    a('vW', [H, KV], 'self_attn.v_proj.weight'),
    ...(attnBias ? [a('vB', [KV], 'self_attn.v_proj.bias')] : []),
    a('oW', [Q, H], 'self_attn.o_proj.weight'),
    ...(outBias ? [a('oB', [H], 'self_attn.o_proj.bias')] : []),
    m('postNormW', [H], 'post_attention_layernorm.weight'),
    m('gateW', [H, I], 'mlp.gate_proj.weight'),
    ...(mlpBias ? [m('gateB', [I], 'mlp.gate_proj.bias')] : []),
    m('upW', [H, I], 'mlp.up_proj.weight'),
    ...(mlpBias ? [m('upB', [I], 'mlp.up_proj.bias')] : []),
    m('downW', [I, H], 'mlp.down_proj.weight'),
    ...(mlpBias ? [m('downB', [H], 'mlp.down_proj.bias')] : []),
  ];
  return {
    family: fam,
    name: typeof c._name_or_path === 'string' && c._name_or_path ? c._name_or_path : fam,
    layers,
    hiddenSize: H,
    vocabSize: vocab,
    maxPositions,
    norm: { kind: 'rmsnorm', placement: 'pre', eps, final: true },
    positions: { kind: 'rope', theta, ...(scaling ? { scaling } : {}) },
    attention: { heads, kvHeads, headDim: hd, bias: attnBias, ...(slidingWindow !== undefined ? { slidingWindow } : {}) },
    mlp: { kind: 'swiglu', intermediateSize: I, bias: mlpBias },
    embedding: { dim: H, tiedHead: tied },
    layerTensors,
    checkpointNames: { embedding: 'model.embed_tokens.weight', layerPrefix: 'model.layers.', finalNorm: 'model.norm.weight', ...(tied ? {} : { head: 'lm_head.weight' }) },
    bosTokenId: tokenId('bos_token_id'),
    eosTokenId: tokenId('eos_token_id'),
    padTokenId: tokenId('pad_token_id'),
  };
}

function ropeScalingFromHf(raw: unknown, maxPositions: number, fail: (m: string) => Error): RopeScaling | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw fail(`rope_scaling is ${JSON.stringify(raw)}; it must be an object or null`);
  const r = raw as Record<string, unknown>;
  // transformers accepts the legacy "type" key as well as "rope_type".
  const kind = r.rope_type ?? r.type;
  const num = (key: string, fallback?: number, min = 0): number => {
    const v = r[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || !(v > min)) throw fail(`rope_scaling.${key} is ${JSON.stringify(r[key])}; it must be a number above ${min}`);
    return v;
  };
  switch (kind) {
    case 'default':
      return undefined;
    case 'linear':
      return { kind: 'linear', factor: num('factor', undefined, 0) };
    case 'dynamic':
      return { kind: 'dynamic', factor: num('factor', undefined, 0), originalMaxPositions: maxPositions };
    case 'llama3': {
      const s = {
        kind: 'llama3' as const,
        factor: num('factor', undefined, 0),
        lowFreqFactor: num('low_freq_factor'),
        highFreqFactor: num('high_freq_factor'),
        originalMaxPositions: num('original_max_position_embeddings'),
      };
      if (!(s.highFreqFactor > s.lowFreqFactor)) throw fail(`rope_scaling.high_freq_factor ${s.highFreqFactor} must be above low_freq_factor ${s.lowFreqFactor}`);
      return s;
    }
    default:
      throw fail(`rope_scaling.rope_type is ${JSON.stringify(kind)}; supported: default, linear, dynamic, llama3`);
  }
}

/** Any supported `config.json` object (`model_type` opt, llama, mistral, qwen2) → its description. */
export function describeHfConfig(json: unknown, source = 'config.json'): ModelDescription {
  const type = (json as { model_type?: unknown } | null)?.model_type;
  if (type === 'opt') return optDescription(optConfigFromHf(json, source));
  if (FAMILIES.includes(type as never)) return llamaDescriptionFromHf(json, source);
  throw new ModelFileError(`${source}: model_type is ${JSON.stringify(type)}; supported: opt, ${FAMILIES.join(', ')}`);
}

/** Reads `<dir>/config.json` (a regular file of bounded size, see `readModelText`) into a description. */
export function readModelDescription(dir: string): ModelDescription {
  const { json, path } = readConfigJson(dir);
  return describeHfConfig(json, path);
}
