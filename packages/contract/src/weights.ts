/** One decoder layer's parameters, float32, Linear weights in PyTorch `[out, in]` order. */
export interface LayerWeights {
  qW: Float32Array; qB: Float32Array;
  kW: Float32Array; kB: Float32Array;
  vW: Float32Array; vB: Float32Array;
  oW: Float32Array; oB: Float32Array;
  /** self_attn_layer_norm */
  ln1W: Float32Array; ln1B: Float32Array;
  /** fc1 [ffn, hidden], fc2 [hidden, ffn] */
  fc1W: Float32Array; fc1B: Float32Array;
  fc2W: Float32Array; fc2B: Float32Array;
  /** the layer's final_layer_norm */
  ln2W: Float32Array; ln2B: Float32Array;
}

/** The input side of any family: the token table, and OPT's learned position table and project_in. */
export interface EmbeddingWeights {
  /** [vocab, embedding.dim]; empty (length 0) when the backend holds the table itself (`ownEndWeights`). */
  tokens: Float32Array;
  /** [maxPositions + offset, hidden]: learned positions only (absent with rotary positions). */
  positions?: Float32Array;
  /** [hidden, wordEmbedProjDim], only when wordEmbedProjDim != hidden */
  projectIn?: Float32Array;
}

/** The output side of any family: the final norm (RMSNorm has no bias), OPT's project_out, the output projection. */
export interface HeadWeights {
  /** The final norm's weight (OPT: decoder.final_layer_norm, pre-LN models only; Llama: model.norm) and bias (LayerNorm). */
  finalLnW?: Float32Array;
  finalLnB?: Float32Array;
  /** [wordEmbedProjDim, hidden], only when wordEmbedProjDim != hidden */
  projectOut?: Float32Array;
  /**
   * Output projection [vocab, embedding.dim]: lm_head.weight, or the token table when tied; empty (length 0) when the
   * backend holds it itself (`ownEndWeights`).
   */
  lmHead: Float32Array;
}
