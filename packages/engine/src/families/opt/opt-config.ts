import { z } from 'zod';
import { ModelFileError } from '../../model-file-error.js';
import { readConfigJson } from '../../read-model-text.js';
import { OPT_MODEL_TYPE } from './opt-model-type.js';

/** The architecture of one OPT model, in Hugging Face `OPTConfig` terms (only what the forward pass needs). */
export interface OptConfig {
  /** Model name for messages and file names (e.g. `opt-125m`). */
  name: string;
  vocabSize: number;
  hiddenSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  ffnDim: number;
  /** Learned position table has `maxPositionEmbeddings + 2` rows (OPT's offset 2). */
  maxPositionEmbeddings: number;
  /** Embedding width; differs from `hiddenSize` only with `project_in`/`project_out` (opt-350m). */
  wordEmbedProjDim: number;
  /** true: pre-LN blocks and a final decoder LayerNorm; false: post-LN blocks (opt-350m). */
  doLayerNormBefore: boolean;
  layerNormEps: number;
  padTokenId: number;
  bosTokenId: number;
  eosTokenId: number;
}

/** Extra rows at the start of OPT's learned position table. */
export const OPT_POSITION_OFFSET = 2;

export function headDim(c: OptConfig): number {
  return c.hiddenSize / c.numAttentionHeads;
}

function base(name: string, layers: number, hidden: number, heads: number, extra: Partial<OptConfig> = {}): OptConfig {
  return {
    name,
    vocabSize: 50272,
    hiddenSize: hidden,
    numHiddenLayers: layers,
    numAttentionHeads: heads,
    ffnDim: 4 * hidden,
    maxPositionEmbeddings: 2048,
    wordEmbedProjDim: hidden,
    doLayerNormBefore: true,
    layerNormEps: 1e-5,
    padTokenId: 1,
    bosTokenId: 2,
    eosTokenId: 2,
    ...extra,
  };
}

/** Architectures of the published facebook/opt-* checkpoints (opt-iml and opt-iml-max share them). */
const ARCHITECTURES: Record<string, OptConfig> = {
  'opt-125m': base('opt-125m', 12, 768, 12),
  'opt-350m': base('opt-350m', 24, 1024, 16, { wordEmbedProjDim: 512, doLayerNormBefore: false }),
  'opt-1.3b': base('opt-1.3b', 24, 2048, 32),
  'opt-2.7b': base('opt-2.7b', 32, 2560, 32),
  'opt-6.7b': base('opt-6.7b', 32, 4096, 32),
  'opt-13b': base('opt-13b', 40, 5120, 40),
  'opt-30b': base('opt-30b', 48, 7168, 56),
  'opt-66b': base('opt-66b', 64, 9216, 72),
  'opt-175b': base('opt-175b', 96, 12288, 96),
};

const IML_SIZES = new Set(['1.3b', '30b']);

/** Names `optConfigByName` accepts, for help texts. */
export function knownOptNames(): string[] {
  const names = Object.keys(ARCHITECTURES);
  for (const size of IML_SIZES) names.push(`opt-iml-${size}`, `opt-iml-max-${size}`);
  return names;
}

/**
 * The config of a published OPT model by name: `opt-1.3b`, `facebook/opt-iml-max-30b`, … (case-insensitive; an
 * organisation prefix before `/` is ignored, and `-iml`/`-iml-max` map to the base architecture as in FlexLLMGen).
 */
export function optConfigByName(name: string): OptConfig {
  const short = name.slice(name.lastIndexOf('/') + 1).toLowerCase();
  const iml = /^opt-iml(?:-max)?-(.+)$/.exec(short);
  if (iml && !IML_SIZES.has(iml[1]!)) {
    throw new Error(`unknown OPT model "${name}": opt-iml and opt-iml-max exist only in sizes ${[...IML_SIZES].join(', ')}`);
  }
  const arch = iml ? `opt-${iml[1]}` : short;
  const config = ARCHITECTURES[arch];
  if (!config) throw new Error(`unknown OPT model "${name}"; known names: ${knownOptNames().join(', ')} (or pass a model folder with config.json)`);
  return { ...config, name: short };
}

/** The HF name, our name and the largest accepted value of each size field of a config. */
const SIZE_LIMITS: { hf: string; key: 'vocabSize' | 'hiddenSize' | 'numHiddenLayers' | 'numAttentionHeads' | 'ffnDim' | 'maxPositionEmbeddings' | 'wordEmbedProjDim'; max: number }[] = [
  // Far above opt-175b (vocab 50272, hidden 12288, 96 layers and heads, ffn 49152, 2048 positions), yet small enough
  // that a typo or a hostile value is refused before anything is sized from it.
  { hf: 'vocab_size', key: 'vocabSize', max: 1_048_576 },
  { hf: 'hidden_size', key: 'hiddenSize', max: 65_536 },
  { hf: 'num_hidden_layers', key: 'numHiddenLayers', max: 1_024 },
  { hf: 'num_attention_heads', key: 'numAttentionHeads', max: 1_024 },
  { hf: 'ffn_dim', key: 'ffnDim', max: 262_144 },
  { hf: 'max_position_embeddings', key: 'maxPositionEmbeddings', max: 1_048_576 },
  { hf: 'word_embed_proj_dim', key: 'wordEmbedProjDim', max: 65_536 },
];

/** The largest single weight tensor, in elements: typed arrays and onnxruntime initializers stay addressable below it. */
export const MAX_TENSOR_ELEMENTS = 2 ** 31 - 1;

/**
 * Checks a config against sane bounds before anything is allocated from it: sizes are integers within
 * `SIZE_LIMITS`, heads divide the hidden size, token ids lie inside the vocabulary, and no weight tensor is too large
 * to hold. Errors name `source`, the field (Hugging Face names with `hfNames`), the value and the allowed range.
 */
export function checkOptConfig(c: OptConfig, source: string, hfNames = false): void {
  const field = (hf: string, key: string) => (hfNames ? hf : key);
  const fail = (message: string) => new ModelFileError(`${source}: ${message}`);
  for (const { hf, key, max } of SIZE_LIMITS) {
    const v: unknown = c[key];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) {
      const base = ARCHITECTURES['opt-175b']![key];
      throw fail(`${field(hf, key)} is ${JSON.stringify(v)}; it must be an integer from 1 to ${max} (opt-175b has ${base})`);
    }
  }
  if (c.hiddenSize % c.numAttentionHeads !== 0) {
    throw fail(`${field('hidden_size', 'hiddenSize')} ${c.hiddenSize} is not divisible by ${field('num_attention_heads', 'numAttentionHeads')} ${c.numAttentionHeads}`);
  }
  for (const [hf, key] of [['pad_token_id', 'padTokenId'], ['bos_token_id', 'bosTokenId'], ['eos_token_id', 'eosTokenId']] as const) {
    const id: unknown = c[key];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= c.vocabSize) {
      throw fail(`${field(hf, key)} is ${JSON.stringify(id)}; it must be a token id from 0 to ${c.vocabSize - 1} (${field('vocab_size', 'vocabSize')} ${c.vocabSize})`);
    }
  }
  // Compared in float32 as the kernels add it: an eps that rounds to 0 there divides a constant row by zero.
  if (!(Math.fround(c.layerNormEps) > 0 && c.layerNormEps < 1)) throw fail(`layerNormEps is ${c.layerNormEps}; it must be between 0 and 1 (and above 0 in float32)`);
  const tensors: [string, number][] = [
    [`embed_tokens (${field('vocab_size', 'vocabSize')} × ${field('word_embed_proj_dim', 'wordEmbedProjDim')})`, c.vocabSize * c.wordEmbedProjDim],
    [`embed_positions ((${field('max_position_embeddings', 'maxPositionEmbeddings')} + 2) × ${field('hidden_size', 'hiddenSize')})`, (c.maxPositionEmbeddings + OPT_POSITION_OFFSET) * c.hiddenSize],
    [`fc1 (${field('ffn_dim', 'ffnDim')} × ${field('hidden_size', 'hiddenSize')})`, c.ffnDim * c.hiddenSize],
    [`q_proj (${field('hidden_size', 'hiddenSize')} × ${field('hidden_size', 'hiddenSize')})`, c.hiddenSize * c.hiddenSize],
  ];
  for (const [what, elements] of tensors) {
    if (elements > MAX_TENSOR_ELEMENTS) throw fail(`the ${what} tensor would hold ${elements} values, more than the ${MAX_TENSOR_ELEMENTS} one tensor may hold`);
  }
}

const size = z.number();
const tokenId = z.number().nullable().optional();
/** The fields of a Hugging Face OPT `config.json` that matter here; unknown fields are ignored. */
const HfOptConfigSchema = z.object({
  model_type: z.literal(OPT_MODEL_TYPE).optional(),
  vocab_size: size,
  hidden_size: size,
  num_hidden_layers: size,
  num_attention_heads: size,
  ffn_dim: size,
  max_position_embeddings: size,
  word_embed_proj_dim: size.optional(),
  do_layer_norm_before: z.boolean().optional(),
  activation_function: z.string().optional(),
  layer_norm_elementwise_affine: z.boolean().optional(),
  enable_bias: z.boolean().optional(),
  _remove_final_layer_norm: z.boolean().optional(),
  // null is what Hugging Face writes for an unset id; OPT's defaults apply then, as for a missing one.
  pad_token_id: tokenId,
  bos_token_id: tokenId,
  eos_token_id: tokenId,
  torch_dtype: z.enum(['float32', 'float16', 'bfloat16']).nullable().optional(),
  _name_or_path: z.string().optional(),
});

/** Parses a Hugging Face OPT `config.json` object; rejects the variants this engine does not compute. */
export function optConfigFromHf(json: unknown, source = 'config.json'): OptConfig {
  const parsed = HfOptConfigSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new ModelFileError(`${source} is not a valid OPT config: ${issues}`);
  }
  const c = parsed.data;
  const unsupported = (what: string) => new ModelFileError(`${source}: ${what} is not supported by this engine (only standard OPT blocks are)`);
  if (c.activation_function !== undefined && c.activation_function !== 'relu') throw unsupported(`activation_function "${c.activation_function}"`);
  if (c.layer_norm_elementwise_affine === false) throw unsupported('layer_norm_elementwise_affine: false');
  if (c.enable_bias === false) throw unsupported('enable_bias: false');
  if (c._remove_final_layer_norm === true) throw unsupported('_remove_final_layer_norm: true');
  const nameOrPath = c._name_or_path ?? OPT_MODEL_TYPE;
  const config: OptConfig = {
    name: nameOrPath.slice(nameOrPath.lastIndexOf('/') + 1) || OPT_MODEL_TYPE,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: c.num_attention_heads,
    ffnDim: c.ffn_dim,
    maxPositionEmbeddings: c.max_position_embeddings,
    wordEmbedProjDim: c.word_embed_proj_dim ?? c.hidden_size,
    doLayerNormBefore: c.do_layer_norm_before ?? true,
    layerNormEps: 1e-5,
    padTokenId: c.pad_token_id ?? 1,
    bosTokenId: c.bos_token_id ?? 2,
    eosTokenId: c.eos_token_id ?? 2,
  };
  checkOptConfig(config, source, true);
  return config;
}

/** Reads `<dir>/config.json`. */
export function readOptConfig(modelDir: string): OptConfig {
  const { json, path } = readConfigJson(modelDir);
  return optConfigFromHf(json, path);
}

/** The Hugging Face `config.json` object for a config (what `save_pretrained` writes for OPT). */
export function optConfigToHf(c: OptConfig, torchDtype: 'float32' | 'float16'): Record<string, unknown> {
  return {
    _name_or_path: c.name,
    _remove_final_layer_norm: false,
    activation_dropout: 0.0,
    activation_function: 'relu',
    architectures: ['OPTForCausalLM'],
    attention_dropout: 0.0,
    bos_token_id: c.bosTokenId,
    do_layer_norm_before: c.doLayerNormBefore,
    dropout: 0.1,
    enable_bias: true,
    eos_token_id: c.eosTokenId,
    ffn_dim: c.ffnDim,
    hidden_size: c.hiddenSize,
    init_std: 0.02,
    layer_norm_elementwise_affine: true,
    layerdrop: 0.0,
    max_position_embeddings: c.maxPositionEmbeddings,
    model_type: OPT_MODEL_TYPE,
    num_attention_heads: c.numAttentionHeads,
    num_hidden_layers: c.numHiddenLayers,
    pad_token_id: c.padTokenId,
    torch_dtype: torchDtype,
    transformers_version: '4.33.3',
    use_cache: true,
    vocab_size: c.vocabSize,
    word_embed_proj_dim: c.wordEmbedProjDim,
  };
}
