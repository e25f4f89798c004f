import type { FamilyName, ModelDescription, RopeScaling } from '@flexhelm/contract';
import { HF_LIMITS, type HfConfigReader } from './hf-config-reader.js';
import { llamaStyleCheckpointNames, llamaStyleTensors, type RotaryLayerTensorKey, type LlamaStyleLayout } from './llama-style-tensors.js';

/** The sizes every rotary (Llama-style) family's config.json states, checked. */
export interface RotarySizes {
  vocab: number;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  maxPositions: number;
  eps: number;
  theta: number;
  scaling?: RopeScaling;
}

/** Family quirks of the shared fields: defaults transformers 4.47.1's `configuration_<family>.py` uses. */
export interface RotaryDefaults {
  /** Whether config.json may set `head_dim` independently of hidden / heads (llama, mistral, gemma2). */
  headDimKey: boolean;
  /** head_dim when config.json has none (Gemma 2: 256); hidden / heads otherwise. */
  headDimDefault?: number;
  epsDefault: number;
  /** rope_theta when config.json has none (10000 unless the family's config class says otherwise: Mixtral 1e6). */
  thetaDefault?: number;
  allowLongrope?: boolean;
}

/** Reads and checks the shared sizes; `r` throws for every bad field. */
export function readRotarySizes(r: HfConfigReader, q: RotaryDefaults): RotarySizes {
  const vocab = r.int('vocab_size', HF_LIMITS.vocab_size);
  const hidden = r.int('hidden_size', HF_LIMITS.hidden_size);
  const layers = r.int('num_hidden_layers', HF_LIMITS.num_hidden_layers);
  const { heads, kvHeads, headDim } = r.attentionSizes(hidden, q.headDimKey, q.headDimDefault);
  const intermediate = r.int('intermediate_size', HF_LIMITS.intermediate_size);
  const maxPositions = r.int('max_position_embeddings', HF_LIMITS.max_position_embeddings);
  const eps = r.eps('rms_norm_eps', q.epsDefault);
  const theta = r.positive('rope_theta', q.thetaDefault ?? 10000);
  r.fullRotary();
  const scaling = r.ropeScaling(maxPositions, headDim, q.allowLongrope ?? false);
  r.checkRope(headDim, theta, scaling, maxPositions);
  r.tensorSizes([['embed_tokens (vocab_size × hidden_size)', vocab * hidden], ['gate_proj (intermediate_size × hidden_size)', 2 * intermediate * hidden], ['q_proj', heads * headDim * hidden]]);
  return { vocab, hidden, layers, heads, kvHeads, headDim, intermediate, maxPositions, eps, theta, ...(scaling ? { scaling } : {}) };
}

/** A sliding window from `sliding_window`: a positive integer, or null (none); `fallback` when absent. */
export function readSlidingWindow(r: HfConfigReader, fallback?: number): number | undefined {
  const w = 'sliding_window' in r.c ? r.c.sliding_window : fallback;
  if (w === null || w === undefined) return undefined;
  if (typeof w !== 'number' || !Number.isInteger(w) || w < 1) throw r.fail(`sliding_window is ${JSON.stringify(w)}; it must be a positive integer or null`);
  return w;
}

/** The parts of a rotary description a family chooses; the rest follows from the sizes. */
export interface RotaryChoices {
  family: FamilyName;
  norm: ModelDescription['norm'];
  attention: Omit<ModelDescription['attention'], 'heads' | 'kvHeads' | 'headDim'>;
  mlp: Omit<ModelDescription['mlp'], 'intermediateSize'>;
  tied: boolean;
  layout: Omit<LlamaStyleLayout, 'hidden' | 'heads' | 'kvHeads' | 'headDim' | 'intermediate'>;
  embeddingScale?: number;
  finalLogitSoftcap?: number;
  tokens: { bos?: number; eos?: number; pad?: number };
}

/** Assembles the description of a rotary family from its checked sizes and choices. */
export function rotaryDescription(r: HfConfigReader, s: RotarySizes, ch: RotaryChoices): ModelDescription<RotaryLayerTensorKey> {
  const name = typeof r.c._name_or_path === 'string' && r.c._name_or_path ? r.c._name_or_path : ch.family;
  return {
    family: ch.family,
    name,
    layers: s.layers,
    hiddenSize: s.hidden,
    vocabSize: s.vocab,
    maxPositions: s.maxPositions,
    norm: ch.norm,
    positions: { kind: 'rope', theta: s.theta, ...(s.scaling ? { scaling: s.scaling } : {}) },
    attention: { heads: s.heads, kvHeads: s.kvHeads, headDim: s.headDim, ...ch.attention },
    mlp: { intermediateSize: s.intermediate, ...ch.mlp },
    embedding: { dim: s.hidden, tiedHead: ch.tied, ...(ch.embeddingScale !== undefined ? { scale: ch.embeddingScale } : {}) },
    ...(ch.finalLogitSoftcap !== undefined ? { finalLogitSoftcap: ch.finalLogitSoftcap } : {}),
    layerTensors: llamaStyleTensors({ hidden: s.hidden, heads: s.heads, kvHeads: s.kvHeads, headDim: s.headDim, intermediate: s.intermediate, ...ch.layout }),
    checkpointNames: llamaStyleCheckpointNames(ch.tied),
    bosTokenId: ch.tokens.bos,
    eosTokenId: ch.tokens.eos,
    padTokenId: ch.tokens.pad,
  };
}
