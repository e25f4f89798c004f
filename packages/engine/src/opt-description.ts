import { headDim, OPT_POSITION_OFFSET, type OptConfig } from './opt-config.js';
import { isOptShaped, type LayerTensorSpec, type ModelDescription, type LayerWeights } from '@flexhelm/contract';
import { OPT_MODEL_TYPE } from './families/opt/opt-model-type.js';

/** The keys of OPT's decoder-layer tensors (`LayerWeights`). */
export type OptLayerTensorKey = keyof LayerWeights;

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
 * The OPT config an OPT description was made from (exact inverse of `optDescription`). `backend` names the caller for
 * the error a backend that computes OPT only throws at `init` for another family.
 */
export function optConfigOfDescription(d: ModelDescription, backend = 'this backend'): OptConfig {
  if (!isOptShaped(d)) {
    throw new Error(`${backend} computes OPT models only; ${d.name} is a ${d.family} model, which the reference backend computes (backend 'reference')`);
  }
  return { ...descriptionSizes(d), padTokenId: d.padTokenId ?? 1, bosTokenId: d.bosTokenId ?? 2, eosTokenId: d.eosTokenId ?? 2 };
}

/** The sizes of a description in `OptConfig`'s terms (every family); the token ids are the caller's to default. */
export function descriptionSizes(d: ModelDescription): Omit<OptConfig, 'padTokenId' | 'bosTokenId' | 'eosTokenId'> {
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
