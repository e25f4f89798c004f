import { headDim, OPT_POSITION_OFFSET, optConfigByName, optConfigToHf, type OptConfig } from './opt-config.js';
import { isOptShaped, type LayerTensorSpec, type ModelDescription, type LayerWeights } from '@flexhelm/contract';
import { OPT_MODEL_TYPE } from './opt-model-type.js';

/** The keys of OPT's decoder-layer tensors (`LayerWeights`). */
export type OptLayerTensorKey = keyof LayerWeights;

/**
 * The description of a published OPT model by name: `opt-1.3b`, `facebook/opt-iml-max-30b`, … (case-insensitive; see
 * `optConfigByName`); undefined for a name that is no OPT name at all, an error for an OPT name of a size that does
 * not exist. Callers name built-in shapes through `descriptionByName`, which asks this.
 */
export function optDescriptionByName(name: string): ModelDescription<OptLayerTensorKey> | undefined {
  if (!/^opt-/i.test(name.slice(name.lastIndexOf('/') + 1))) return undefined;
  return optDescription(optConfigByName(name));
}

/** OPT's description: learned positions (offset 2), LayerNorm (pre, or post for opt-350m), ReLU MLP, tied head. */
export function optDescription(c: OptConfig): ModelDescription<OptLayerTensorKey> {
  const E = c.hiddenSize;
  const F = c.ffnDim;
  const a = (key: OptLayerTensorKey, shape: number[], checkpointSuffix: string): LayerTensorSpec<OptLayerTensorKey> => ({ key, shape, group: 'attention', checkpointSuffix });
  const m = (key: OptLayerTensorKey, shape: number[], checkpointSuffix: string): LayerTensorSpec<OptLayerTensorKey> => ({ key, shape, group: 'mlp', checkpointSuffix });
  return {
    family: OPT_MODEL_TYPE,
    name: c.name,
    layers: c.numHiddenLayers,
    hiddenSize: E,
    vocabSize: c.vocabSize,
    maxPositions: c.maxPositionEmbeddings,
    norm: { kind: 'layernorm', placement: c.doLayerNormBefore ? 'pre' : 'post', eps: c.layerNormEps, final: c.doLayerNormBefore },
    positions: { kind: 'learned', offset: OPT_POSITION_OFFSET },
    attention: { heads: c.numAttentionHeads, kvHeads: c.numAttentionHeads, headDim: headDim(c), bias: true },
    mlp: { kind: 'relu', intermediateSize: F, bias: true },
    embedding: { dim: c.wordEmbedProjDim, tiedHead: true },
    bosTokenId: c.bosTokenId,
    eosTokenId: c.eosTokenId,
    padTokenId: c.padTokenId,
    layerTensors: [
      a('qW', [E, E], 'self_attn.q_proj.weight'), a('qB', [E], 'self_attn.q_proj.bias'),
      a('kW', [E, E], 'self_attn.k_proj.weight'), a('kB', [E], 'self_attn.k_proj.bias'),
      a('vW', [E, E], 'self_attn.v_proj.weight'), a('vB', [E], 'self_attn.v_proj.bias'),
      a('oW', [E, E], 'self_attn.out_proj.weight'), a('oB', [E], 'self_attn.out_proj.bias'),
      a('ln1W', [E], 'self_attn_layer_norm.weight'), a('ln1B', [E], 'self_attn_layer_norm.bias'),
      m('fc1W', [E, F], 'fc1.weight'), m('fc1B', [F], 'fc1.bias'),
      m('fc2W', [F, E], 'fc2.weight'), m('fc2B', [E], 'fc2.bias'),
      m('ln2W', [E], 'final_layer_norm.weight'), m('ln2B', [E], 'final_layer_norm.bias'),
    ],
  };
}

/**
 * The OPT config an OPT description was made from (exact inverse of `optDescription`): the one way from a description
 * to the struct OPT's reader, maker and kernels read inside this folder. `who` names the caller for the error it
 * throws for a description of other kinds.
 */
export function optConfigOfDescription(d: ModelDescription, who: string): OptConfig {
  if (!isOptShaped(d)) {
    throw new Error(`${who} takes OPT-shaped models only (learned positions, LayerNorm, ReLU MLP); ${d.name} is a ${d.family} model`);
  }
  return { ...descriptionSizes(d), padTokenId: d.padTokenId ?? 1, bosTokenId: d.bosTokenId ?? 2, eosTokenId: d.eosTokenId ?? 2 };
}

/** The sizes of a description in `OptConfig`'s terms; the token ids are the caller's to default. */
function descriptionSizes(d: ModelDescription): Omit<OptConfig, 'padTokenId' | 'bosTokenId' | 'eosTokenId'> {
  return {
    name: d.name,
    vocabSize: d.vocabSize,
    hiddenSize: d.hiddenSize,
    numHiddenLayers: d.layers,
    numAttentionHeads: d.attention.heads,
    ffnDim: d.mlp.intermediateSize,
    maxPositionEmbeddings: d.maxPositions,
    wordEmbedProjDim: d.embedding.dim,
    doLayerNormBefore: d.norm.placement === 'pre',
    layerNormEps: d.norm.eps,
  };
}

/** The Hugging Face `config.json` object of an OPT description (what `save_pretrained` writes for OPT). */
export function optHfConfig(d: ModelDescription, torchDtype: 'float32' | 'float16'): Record<string, unknown> {
  return optConfigToHf(optConfigOfDescription(d, 'optHfConfig'), torchDtype);
}
