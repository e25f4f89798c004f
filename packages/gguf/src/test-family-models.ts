import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeHfConfig, Engine, hfConfigJson, ReferenceBackend, writeSafetensors } from '@flexhelm/engine';
import { GgufTensorSource } from './gguf-tensor-source.js';
import type { ImportedGguf } from './import-gguf.js';
import { type TestType, testQuantize, testTypeId } from './test-quantizers.js';
import { f32Bytes, type TestTensor, type TestValue, writeTestGguf } from './test-gguf-writer.js';

/** Tiny configs of every family GGUF files carry, each with its quirks switched on (rope scaling, windows, caps). */
export const TINY_CONFIGS: Record<string, Record<string, unknown>> = {
  llama: {
    model_type: 'llama', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
    intermediate_size: 96, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: false, bos_token_id: 1, eos_token_id: 2,
    rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  },
  qwen2: { model_type: 'qwen2', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, max_position_embeddings: 4096, rms_norm_eps: 1e-6, rope_theta: 1000000, tie_word_embeddings: true },
  gemma2: {
    model_type: 'gemma2', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, intermediate_size: 96,
    max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000, query_pre_attn_scalar: 16, attn_logit_softcapping: 50, final_logit_softcapping: 30, sliding_window: 4, hidden_activation: 'gelu_pytorch_tanh',
  },
  phi3: {
    model_type: 'phi3', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, intermediate_size: 96, max_position_embeddings: 131072,
    original_max_position_embeddings: 4096, rms_norm_eps: 1e-5, rope_theta: 10000, sliding_window: 262144, tie_word_embeddings: false,
    rope_scaling: { type: 'longrope', short_factor: [1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], long_factor: [1, 2, 3, 4, 5, 6, 7, 8] },
  },
  mixtral: {
    model_type: 'mixtral', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, intermediate_size: 64,
    max_position_embeddings: 4096, rms_norm_eps: 1e-5, rope_theta: 1000000, tie_word_embeddings: false, num_local_experts: 4, num_experts_per_tok: 2, sliding_window: null,
  },
  qwen2_moe: {
    model_type: 'qwen2_moe', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, max_position_embeddings: 4096,
    rms_norm_eps: 1e-6, rope_theta: 1000000, tie_word_embeddings: false, num_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 32, shared_expert_intermediate_size: 64, norm_topk_prob: false,
  },
  olmo2: { model_type: 'olmo2', vocab_size: 300, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, intermediate_size: 96, max_position_embeddings: 4096, rms_norm_eps: 1e-6, rope_theta: 500000 },
};

/** Deterministic uniform values in [−r, r). */
function uniform(n: number, seed: number, r: number): Float32Array {
  let s = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * 2 * r;
  }
  return out;
}

/** Every checkpoint tensor of a config (`[out, in]` shapes), random: norms near 1, the rest scaled by fan-in. */
export function randomCheckpoint(config: Record<string, unknown>, seed = 1): Map<string, { shape: number[]; values: Float32Array }> {
  const d = describeHfConfig(config);
  const names = d.checkpointNames!;
  const shapes = new Map<string, number[]>([[names.embedding, [d.vocabSize, d.hiddenSize]], [names.finalNorm, [d.hiddenSize]]]);
  if (names.head) shapes.set(names.head, [d.vocabSize, d.hiddenSize]);
  for (let l = 0; l < d.layers; l++) {
    for (const t of d.layerTensors) {
      const name = `${names.layerPrefix}${l}.${t.checkpointSuffix}`;
      const rows = t.checkpointRows ? t.checkpointRows[1] : t.shape.length === 2 ? t.shape[1]! : t.shape[0]!;
      const shape = t.shape.length === 2 ? [Math.max(rows, shapes.get(name)?.[0] ?? 0), t.shape[0]!] : t.shape;
      shapes.set(name, shape);
    }
  }
  const out = new Map<string, { shape: number[]; values: Float32Array }>();
  let k = seed * 1000;
  for (const [name, shape] of shapes) {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = uniform(n, k++, name.endsWith('norm.weight') ? 0.25 : 1.5 / Math.sqrt(shape[shape.length - 1]!));
    if (name.endsWith('norm.weight') && config.model_type !== 'gemma2') for (let i = 0; i < n; i++) v[i]! += 1;
    out.set(name, { shape, values: v });
  }
  return out;
}

/** The model folder (config.json, F32 model.safetensors) of a checkpoint. */
export function writeFolder(dir: string, config: Record<string, unknown>, ckpt: ReturnType<typeof randomCheckpoint>): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), hfConfigJson(config));
  writeSafetensors(join(dir, 'model.safetensors'), [...ckpt].map(([name, t]) => ({ name, shape: t.shape, dtype: 'F32' as const, data: t.values })));
}

// The test's own statement of llama.cpp's tensor names (gguf-py's tensor_mapping), HF suffix → GGUF name.
const LAYER: [RegExp, string][] = [
  [/input_layernorm/, 'attn_norm'], [/self_attn\.q_proj/, 'attn_q'], [/self_attn\.k_proj/, 'attn_k'], [/self_attn\.v_proj/, 'attn_v'],
  [/self_attn\.o_proj/, 'attn_output'], [/self_attn\.qkv_proj/, 'attn_qkv'], [/self_attn\.q_norm/, 'attn_q_norm'], [/self_attn\.k_norm/, 'attn_k_norm'],
  [/mlp\.gate_up_proj/, 'ffn_up'], [/mlp\.gate_proj/, 'ffn_gate'], [/mlp\.up_proj/, 'ffn_up'], [/mlp\.down_proj/, 'ffn_down'],
  [/pre_feedforward_layernorm/, 'ffn_norm'], [/post_feedforward_layernorm/, 'post_ffw_norm'],
];

// Sparse layers (gguf-py's tensor_mapping for Mixtral and Qwen2-MoE): the router, each expert's projections (merged
// into one 3-D tensor per projection by the converter) and Qwen2-MoE's shared expert.
const EXPERT: [RegExp, string][] = [
  [/^(block_sparse_moe|mlp)\.gate$/, 'ffn_gate_inp'], [/^mlp\.shared_expert_gate$/, 'ffn_gate_inp_shexp'],
  [/^mlp\.shared_expert\.gate_proj$/, 'ffn_gate_shexp'], [/^mlp\.shared_expert\.up_proj$/, 'ffn_up_shexp'], [/^mlp\.shared_expert\.down_proj$/, 'ffn_down_shexp'],
];
const EXPERT_PROJ: [RegExp, string][] = [[/^(block_sparse_moe\.experts\.(\d+)\.w1|mlp\.experts\.(\d+)\.gate_proj)$/, 'gate'], [/^(block_sparse_moe\.experts\.(\d+)\.w3|mlp\.experts\.(\d+)\.up_proj)$/, 'up'], [/^(block_sparse_moe\.experts\.(\d+)\.w2|mlp\.experts\.(\d+)\.down_proj)$/, 'down']];

/** An expert's projection (`gate`, `up`, `down`) and index, for a layer-local HF name; undefined for other tensors. */
function expertProjection(local: string): { proj: string; expert: number } | undefined {
  for (const [re, proj] of EXPERT_PROJ) {
    const m = re.exec(local);
    if (m) return { proj, expert: Number(m[2] ?? m[3]) };
  }
  return undefined;
}

function ggufName(hf: string, arch: string): string {
  if (hf === 'model.embed_tokens.weight') return 'token_embd.weight';
  if (hf === 'model.norm.weight') return 'output_norm.weight';
  if (hf === 'lm_head.weight') return 'output.weight';
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hf)!;
  let base: string | undefined;
  // post_attention_layernorm is llama's ffn_norm, but a post-branch norm in Gemma 2 and OLMo 2.
  if (m[2] === 'post_attention_layernorm') base = arch === 'gemma2' || arch === 'olmo2' ? 'post_attention_norm' : 'ffn_norm';
  else base = EXPERT.find(([re]) => re.test(m[2]!))?.[1] ?? LAYER.find(([re]) => re.test(m[2]!))![1];
  return `blk.${m[1]}.${base}.${m[3]}`;
}

/** llama.cpp's `LlamaModel.permute`: rows of each head reordered from halves (NeoX) to interleaved pairs (GPT-J). */
function permute(v: Float32Array, heads: number, cols: number): Float32Array {
  const hd = v.length / cols / heads;
  const out = new Float32Array(v.length);
  for (let h = 0; h < heads; h++) {
    for (let r = 0; r < hd; r++) {
      // reshape(heads, 2, hd/2, cols).swapaxes(1, 2): source row (h, i, j) lands at (h, j, i).
      const i = Math.floor(r / (hd / 2));
      const j = r % (hd / 2);
      out.set(v.subarray((h * hd + r) * cols, (h * hd + r + 1) * cols), (h * hd + j * 2 + i) * cols);
    }
  }
  return out;
}

const u32 = (value: number): TestValue => ({ type: 'u32', value });
const f32 = (value: number): TestValue => ({ type: 'f32', value });

/** A byte-level vocabulary of `n` tokens for the files' tokenizer metadata (single bytes, then pairs). */
function testVocab(n: number): { tokens: string[]; merges: string[] } {
  const bytes: string[] = [];
  for (let b = 33; bytes.length < 256; b++) bytes.push(String.fromCodePoint(b < 127 || b > 160 ? b : b + 256));
  const tokens = ['<|begin|>', '<|end|>', ...bytes];
  const merges: string[] = [];
  for (let i = 0; tokens.length < n; i++) {
    const l = bytes[i % 26 + 64]!;
    const r = bytes[Math.floor(i / 26) + 64]!;
    tokens.push(l + r);
    merges.push(`${l} ${r}`);
  }
  return { tokens: tokens.slice(0, n), merges };
}

/**
 * The same checkpoint as a GGUF file laid out as llama.cpp's converter lays it out: GGUF names, ggml dims, llama q/k
 * permuted, Gemma norms stored as 1 + w, Llama 3.1 rope scaling as `rope_freqs`, Phi-3 longrope as factor tensors;
 * matrices in `matrixType` (F32 or a quantised type), norms and biases F32 (as llama.cpp keeps 1-D tensors).
 */
export function writeFamilyGguf(
  path: string,
  config: Record<string, unknown>,
  ckpt: ReturnType<typeof randomCheckpoint>,
  matrixType: TestType = 'F32',
  override: Record<string, TestValue> = {},
  // Each expert as its own `ffn_gate.<e>` matrix, as converters wrote Mixtral before merging (early 2024).
  { splitExperts = false }: { splitExperts?: boolean } = {},
): void {
  // Mixtral's files are llama files with experts; Qwen2-MoE's architecture is qwen2moe.
  const arch = ({ mixtral: 'llama', qwen2_moe: 'qwen2moe' } as Record<string, string>)[config.model_type as string] ?? (config.model_type as string);
  const c = config as Record<string, number>;
  const headDim = c.head_dim ?? c.hidden_size! / c.num_attention_heads!;
  const tensors: TestTensor[] = [];
  const merged = new Map<string, { dims: number[]; parts: Uint8Array[] }>();
  for (const [name, t] of ckpt) {
    let v = t.values;
    if (arch === 'llama' && /self_attn\.[qk]_proj/.test(name)) v = permute(v, name.includes('q_proj') ? c.num_attention_heads! : c.num_key_value_heads!, t.shape[1] ?? 1);
    if (arch === 'gemma2' && name.endsWith('norm.weight')) v = v.map((x) => x + 1);
    const [, layer, local] = /^model\.layers\.(\d+)\.(.+)\.weight$/.exec(name) ?? [];
    const expert = local === undefined ? undefined : expertProjection(local);
    if (expert) {
      if (splitExperts) {
        tensors.push({ name: `blk.${layer}.ffn_${expert.proj}.${expert.expert}.weight`, dims: [...t.shape].reverse(), typeId: testTypeId(matrixType), data: testQuantize(matrixType, v) });
      } else {
        const key = `blk.${layer}.ffn_${expert.proj}_exps.weight`;
        const m = merged.get(key) ?? { dims: [...t.shape].reverse(), parts: [] };
        m.parts[expert.expert] = testQuantize(matrixType, v);
        merged.set(key, m);
      }
      continue;
    }
    const gguf = ggufName(name, arch);
    // The router and the shared expert's gate stay F32 (llama.cpp never quantizes them); the gate is stored 1-D.
    const keepF32 = /ffn_gate_inp(_shexp)?\.weight$/.test(gguf);
    const type = t.shape.length === 2 && !keepF32 ? matrixType : 'F32';
    const dims = gguf.endsWith('ffn_gate_inp_shexp.weight') ? [t.shape[1]!] : [...t.shape].reverse();
    tensors.push({ name: gguf, dims, typeId: testTypeId(type), data: testQuantize(type, v) });
  }
  for (const [name, { dims, parts }] of merged) {
    tensors.push({ name, dims: [...dims, parts.length], typeId: testTypeId(matrixType), data: Buffer.concat(parts) });
  }
  const md: [string, TestValue][] = [
    ['general.architecture', { type: 'string', value: arch }],
    ['general.name', { type: 'string', value: `tiny-${config.model_type}` }],
    [`${arch}.context_length`, u32(c.max_position_embeddings!)],
    [`${arch}.embedding_length`, u32(c.hidden_size!)],
    [`${arch}.block_count`, u32(c.num_hidden_layers!)],
    [`${arch}.feed_forward_length`, u32(c.intermediate_size!)],
    [`${arch}.attention.head_count`, u32(c.num_attention_heads!)],
    [`${arch}.attention.head_count_kv`, u32(c.num_key_value_heads!)],
    [`${arch}.rope.freq_base`, f32(c.rope_theta!)],
    [`${arch}.attention.layer_norm_rms_epsilon`, f32(c.rms_norm_eps!)],
    [`${arch}.attention.key_length`, u32(headDim)],
    [`${arch}.attention.value_length`, u32(headDim)],
  ];
  if (config.model_type === 'mixtral') md.push([`${arch}.expert_count`, u32(c.num_local_experts!)], [`${arch}.expert_used_count`, u32(c.num_experts_per_tok!)]);
  if (config.model_type === 'qwen2_moe') {
    md.push(
      [`${arch}.expert_count`, u32(c.num_experts!)], [`${arch}.expert_used_count`, u32(c.num_experts_per_tok!)],
      [`${arch}.expert_feed_forward_length`, u32(c.moe_intermediate_size!)], [`${arch}.expert_shared_feed_forward_length`, u32(c.shared_expert_intermediate_size!)],
    );
  }
  const rs = config.rope_scaling as Record<string, unknown> | undefined;
  if (arch === 'llama' && rs) {
    // gguf-py's LlamaModel.generate_extra_tensors for Llama 3.1.
    const factors: number[] = [];
    const orig = rs.original_max_position_embeddings as number;
    for (let i = 0; i < headDim / 2; i++) {
      const freq = 1 / c.rope_theta! ** ((2 * i) / headDim);
      const wave = (2 * Math.PI) / freq;
      const smooth = (orig / wave - 1) / (4 - 1);
      factors.push(wave < orig / 4 ? 1 : wave > orig ? (rs.factor as number) : 1 / ((1 - smooth) / (rs.factor as number) + smooth));
    }
    tensors.push({ name: 'rope_freqs.weight', dims: [headDim / 2], typeId: 0, data: f32Bytes(factors) });
  }
  if (arch === 'phi3' && rs) {
    tensors.push({ name: 'rope_factors_long.weight', dims: [headDim / 2], typeId: 0, data: f32Bytes(rs.long_factor as number[]) });
    tensors.push({ name: 'rope_factors_short.weight', dims: [headDim / 2], typeId: 0, data: f32Bytes(rs.short_factor as number[]) });
    md.push([`${arch}.rope.scaling.original_context_length`, u32(c.original_max_position_embeddings!)]);
  }
  if (arch === 'gemma2') {
    md.push([`${arch}.attn_logit_softcapping`, f32(c.attn_logit_softcapping!)], [`${arch}.final_logit_softcapping`, f32(c.final_logit_softcapping!)], [`${arch}.attention.sliding_window`, u32(c.sliding_window!)]);
  }
  if (arch === 'phi3') md.push([`${arch}.attention.sliding_window`, u32(c.sliding_window!)]);
  const { tokens, merges } = testVocab(c.vocab_size!);
  md.push(
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: 'llama-bpe' }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: tokens.map((_, i) => (i < 2 ? 3 : 1)) }],
    ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', value: merges }],
    ['tokenizer.ggml.bos_token_id', u32(0)],
    ['tokenizer.ggml.eos_token_id', u32(1)],
    ['tokenizer.chat_template', { type: 'string', value: '{% for m in messages %}{{ m.content }}{% endfor %}' }],
  );
  // Overrides replace a key's value (or add the key), for refusal tests.
  const keys = new Set(md.map(([k]) => k));
  const metadata = md.map(([k, v]): [string, TestValue] => [k, override[k] ?? v]).concat(Object.entries(override).filter(([k]) => !keys.has(k)));
  writeTestGguf(path, { metadata, tensors });
}

/**
 * Logits of the reference backend for `ids` (every position, every row unmasked): of a model folder, or of an imported
 * GGUF file read in place as `flexhelm run` reads it.
 */
export async function referenceLogits(model: string | ImportedGguf, ids: number[][]): Promise<Float32Array> {
  const backend = new ReferenceBackend();
  const engine = typeof model === 'string' ? await Engine.load(model, { backend }) : await Engine.fromSource(model.description, new GgufTensorSource(model.gguf), { backend });
  try {
    return await engine.forwardLogits(ids, ids.map((r) => r.map(() => 1)));
  } finally {
    await engine.close();
  }
}
