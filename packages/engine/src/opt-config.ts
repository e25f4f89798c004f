import { readFileSync } from 'node:fs';
import { z } from 'zod';

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

const positiveInt = z.number().int().positive();
/** The fields of a Hugging Face OPT `config.json` that matter here; unknown fields are ignored. */
const HfOptConfigSchema = z.object({
  model_type: z.literal('opt').optional(),
  vocab_size: positiveInt,
  hidden_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  ffn_dim: positiveInt,
  max_position_embeddings: positiveInt,
  word_embed_proj_dim: positiveInt.optional(),
  do_layer_norm_before: z.boolean().optional(),
  activation_function: z.string().optional(),
  layer_norm_elementwise_affine: z.boolean().optional(),
  enable_bias: z.boolean().optional(),
  _remove_final_layer_norm: z.boolean().optional(),
  pad_token_id: z.number().int().optional(),
  bos_token_id: z.number().int().optional(),
  eos_token_id: z.number().int().optional(),
  _name_or_path: z.string().optional(),
});

/** Parses a Hugging Face OPT `config.json` object; rejects the variants this engine does not compute. */
export function optConfigFromHf(json: unknown, source = 'config.json'): OptConfig {
  const parsed = HfOptConfigSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`${source} is not a valid OPT config: ${issues}`);
  }
  const c = parsed.data;
  const unsupported = (what: string) => new Error(`${source}: ${what} is not supported by this engine (only standard OPT blocks are)`);
  if (c.activation_function !== undefined && c.activation_function !== 'relu') throw unsupported(`activation_function "${c.activation_function}"`);
  if (c.layer_norm_elementwise_affine === false) throw unsupported('layer_norm_elementwise_affine: false');
  if (c.enable_bias === false) throw unsupported('enable_bias: false');
  if (c._remove_final_layer_norm === true) throw unsupported('_remove_final_layer_norm: true');
  if (c.hidden_size % c.num_attention_heads !== 0) {
    throw new Error(`${source}: hidden_size ${c.hidden_size} is not divisible by num_attention_heads ${c.num_attention_heads}`);
  }
  const nameOrPath = c._name_or_path ?? 'opt';
  return {
    name: nameOrPath.slice(nameOrPath.lastIndexOf('/') + 1) || 'opt',
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
}

/** Reads `<dir>/config.json`. */
export function readOptConfig(modelDir: string): OptConfig {
  const path = `${modelDir}/config.json`;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message} (a model folder needs the Hugging Face config.json)`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
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
    model_type: 'opt',
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
