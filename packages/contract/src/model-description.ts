/**
 * One decoder-layer tensor in the layout backends compute with (Linear weights `[in, out]`), and the FlexLLMGen layer
 * object it belongs to (offloading places each object's tensors by the weight percents on its own).
 */
export interface LayerTensorSpec<K extends string = string> {
  key: K;
  shape: number[];
  group: 'attention' | 'mlp';
  /** The checkpoint's name of the tensor inside layer `i`'s prefix (`decoder.layers.<i>.`), before transposing. */
  checkpointSuffix: string;
  /**
   * Set when the checkpoint tensor is fused (Phi-3's `qkv_proj`, `gate_up_proj`): this tensor is rows
   * `[start, end)` of it in the checkpoint's `[out, in]` layout; the keys sharing a suffix cover all its rows.
   */
  checkpointRows?: [number, number];
}

/** How token positions enter the model. */
export type PositionScheme =
  | { kind: 'learned'; /** Rows of the table before position 0 (OPT: 2). */ offset: number }
  | { kind: 'rope'; theta: number; scaling?: RopeScaling };

/**
 * transformers 4.47.1's `rope_scaling` types (modeling_rope_utils.py); `default` is no scaling (absent). Positions are
 * model positions; `originalMaxPositions` is `original_max_position_embeddings` (llama3) or `max_position_embeddings`
 * (dynamic).
 */
export type RopeScaling =
  | { kind: 'linear'; factor: number }
  | { kind: 'dynamic'; factor: number; originalMaxPositions: number }
  | { kind: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositions: number }
  /**
   * Phi-3's longrope (4.47.1 `Phi3LongRoPEScaledRotaryEmbedding`): `inv_freq[i] = 1 / (factor[i] · theta^(2i/hd))` with
   * `longFactor` when the call's key count (cached + new tokens, the padded width) exceeds `originalMaxPositions`, else
   * `shortFactor` (one set for the whole batch); cos and sin are both multiplied by `cosSinScale`
   * (`sqrt(1 + ln(maxPositions / originalMaxPositions) / ln(originalMaxPositions))`, or 1). A cached decode that first
   * crosses `originalMaxPositions` recomputes the sequence with the long factors (what transformers does).
   */
  | { kind: 'longrope'; shortFactor: number[]; longFactor: number[]; originalMaxPositions: number; cosSinScale: number };

/**
 * A `model_type` the registry knows (one folder each under `families/`): a string, not a union of names, so adding a
 * family touches no file outside its folder. `familyEntry` validates it against `FAMILY_REGISTRY`; code outside
 * `families/` reads a description's kinds, never its family name.
 */
export type FamilyName = string;

/**
 * A mixture-of-experts MLP (Mixtral, Qwen2-MoE) in place of the dense one on the layers `sparseLayers` names. Per token
 * x `[H]`: router logits `x · routerW` `[E]`, `p = softmax` (float32), the `topK` largest p (lower expert index first on
 * an exact tie), divided by their sum when `renormalize`, then `Σ_k w_k · expert_k(x)` with each expert a SwiGLU MLP of
 * `expertIntermediateSize` (activation: `mlp.kind`); with a shared expert, `+ sigmoid(x · sharedExpertGateW) ·
 * shared(x)` (a SwiGLU of `sharedExpertIntermediateSize`). The other layers compute the dense `mlp`.
 */
export interface MoeSpec<K extends string = string> {
  experts: number;
  topK: number;
  /** Mixtral always; Qwen2-MoE's `norm_topk_prob`. */
  renormalize: boolean;
  expertIntermediateSize: number;
  /** Qwen2-MoE's shared expert (with its sigmoid gate); absent: none (Mixtral). */
  sharedExpertIntermediateSize?: number;
  /** The sparse layers, ascending (Qwen2-MoE's `decoder_sparse_step` and `mlp_only_layers` leave some dense). */
  sparseLayers: number[];
  /**
   * The tensors of a dense layer, when some layers are dense (`layerTensors` lists a sparse layer's): the dense MLP
   * of `mlp.intermediateSize` in place of the router and the experts. Read them through `layerTensorsOf`.
   */
  denseLayerTensors?: LayerTensorSpec<K>[];
}

/**
 * Where a layer's norms sit. `pre`: before each sub-block (Llama, OPT). `post`: after each residual add (opt-350m).
 * `post-branch`: on each sub-block's output before the residual add, the input not normalised (OLMo 2: tensors
 * `attnOutNormW`, `mlpOutNormW`). `pre-and-post-branch`: both (Gemma 2's four norms a layer).
 */
export type NormPlacement = 'pre' | 'post' | 'post-branch' | 'pre-and-post-branch';

/**
 * Everything a backend, the offloading tiers and the memory planner need to know about a decoder-only model family,
 * in one place: sizes, normalisation, positions, attention, MLP, embedding and head, and the per-layer tensors. The
 * engine contract (`DecoderBackend`) stays the same across families; a family is a new description (and the kernels that
 * read its fields). OPT is the one implemented; Llama-style models fill the same fields (RMSNorm, RoPE, grouped-query
 * attention with `kvHeads < heads`, sliding window, SwiGLU, untied heads).
 */
export interface ModelDescription<K extends string = string> {
  family: FamilyName;
  name: string;
  layers: number;
  hiddenSize: number;
  vocabSize: number;
  maxPositions: number;
  norm: {
    /** `rmsnorm-plus-one`: Gemma's `(x / rms) · (1 + w)`, all in float32 (Llama's casts before the weight multiply). */
    kind: 'layernorm' | 'rmsnorm' | 'rmsnorm-plus-one';
    placement: NormPlacement;
    eps: number;
    /** A norm after the last layer. */
    final: boolean;
  };
  positions: PositionScheme;
  attention: {
    heads: number;
    /** Key/value heads (grouped-query attention when fewer than `heads`). */
    kvHeads: number;
    /** Independent of `hiddenSize / heads` (Gemma 2: 256 with hidden 2304). */
    headDim: number;
    bias: boolean;
    /** Multiplier of q·kᵀ; absent = `headDim^-0.5` (Gemma 2: `query_pre_attn_scalar^-0.5`). */
    scale?: number;
    /** `s = cap · tanh(s / cap)` on the scaled scores before the mask (Gemma 2's `attn_logit_softcapping`). */
    logitSoftcap?: number;
    /** Keys j a query i may attend: `i − j < slidingWindow` (and causal), on the layers `slidingWindowLayers` names. */
    slidingWindow?: number;
    /** Absent or `all`: every layer; `even`: layers with an even index only (Gemma 2), the others global. */
    slidingWindowLayers?: 'all' | 'even';
    /**
     * `projection`: RMSNorm (the description's eps, Llama style) over the whole q and k projections, all heads together,
     * before the split into heads and before RoPE (OLMo 2: tensors `qNormW` [heads·headDim], `kNormW` [kvHeads·headDim]).
     */
    qkNorm?: 'projection';
  };
  mlp: {
    /** `geglu-tanh`: `down(gelu_tanh(gate(x)) · up(x))` (Gemma 2); `swiglu`: `down(silu(gate(x)) · up(x))`. */
    kind: 'relu' | 'gelu' | 'swiglu' | 'geglu-tanh';
    /** The dense MLP's; with `moe` the dense layers' (Qwen2-MoE), or the experts' when no layer is dense (Mixtral). */
    intermediateSize: number;
    bias: boolean;
  };
  /** A mixture-of-experts MLP on some or all layers (see `MoeSpec`); absent: every layer has the dense `mlp`. */
  moe?: MoeSpec<K>;
  embedding: {
    /** Width of the token table (differs from `hiddenSize` with project_in/project_out). */
    dim: number;
    tiedHead: boolean;
    /** Token embeddings are multiplied by this (Gemma: sqrt(hidden), the factor first rounded to the compute dtype). */
    scale?: number;
  };
  /** `logits = cap · tanh(logits / cap)` after the head (Gemma 2's `final_logit_softcapping`). */
  finalLogitSoftcap?: number;
  /**
   * Every decoder-layer tensor in FlexLLMGen's order (attention object, then MLP object). Norm keys of the
   * Llama-style families: `inNormW` before attention, `postNormW` before the MLP (Llama's `post_attention_layernorm`),
   * `attnOutNormW` / `mlpOutNormW` on the branch outputs (`post-branch` placements), `qNormW` / `kNormW` (`qkNorm`).
   * With `moe`, a sparse layer's: `routerW` `[H, E]`, `expert.<e>.gateW`/`upW`/`downW`, and with a shared expert
   * `sharedGateW`/`sharedUpW`/`sharedDownW` and `sharedExpertGateW` `[H, 1]`; dense layers' are `moe.denseLayerTensors`.
   * Layers may differ only that way: read one layer's list with `layerTensorsOf`.
   */
  layerTensors: LayerTensorSpec<K>[];
  /**
   * Checkpoint names outside the layers and the layer prefix (`<layerPrefix><i>.<checkpointSuffix>`); set for the
   * Llama family (OPT's loader has its own). `head` is absent when the head is tied to the embedding.
   */
  checkpointNames?: { embedding: string; layerPrefix: string; finalNorm: string; head?: string };
  /** Special token ids from config.json (unset ones are undefined: Llama checkpoints often have no pad id). */
  bosTokenId?: number;
  eosTokenId?: number;
  padTokenId?: number;
}

/**
 * The kinds a description uses, one name each: what a backend declares it computes (`supportedKinds`) and what it
 * refuses at init otherwise, so a model is never computed with a kernel of another kind.
 */
export type ModelKind =
  | 'norm:layernorm' | 'norm:rmsnorm' | 'norm:rmsnorm-plus-one'
  | 'placement:pre' | 'placement:post' | 'placement:post-branch' | 'placement:pre-and-post-branch'
  | 'positions:learned' | 'rope:default' | 'rope:linear' | 'rope:dynamic' | 'rope:llama3' | 'rope:longrope'
  | 'attention:scale' | 'attention:logit-softcap' | 'attention:window' | 'attention:window-even-layers' | 'attention:qk-norm'
  | 'mlp:relu' | 'mlp:gelu' | 'mlp:swiglu' | 'mlp:geglu-tanh'
  /** `moe`: routed experts; `moe-shared-expert`: Qwen2-MoE's gated shared expert; `moe-dense-layers`: some layers dense. */
  | 'mlp:moe' | 'mlp:moe-shared-expert' | 'mlp:moe-dense-layers'
  | 'embedding:scale' | 'head:logit-softcap';

/** Every kind `d` uses (see `ModelKind`). */
export function modelKinds(d: ModelDescription): ModelKind[] {
  const kinds: ModelKind[] = [`norm:${d.norm.kind}`, `placement:${d.norm.placement}`, `mlp:${d.mlp.kind}`];
  kinds.push(d.positions.kind === 'learned' ? 'positions:learned' : `rope:${d.positions.scaling?.kind ?? 'default'}`);
  const a = d.attention;
  if (a.scale !== undefined && a.scale !== a.headDim ** -0.5) kinds.push('attention:scale');
  if (a.logitSoftcap !== undefined) kinds.push('attention:logit-softcap');
  if (a.slidingWindow !== undefined) kinds.push(a.slidingWindowLayers === 'even' ? 'attention:window-even-layers' : 'attention:window');
  if (a.qkNorm !== undefined) kinds.push('attention:qk-norm');
  if (d.embedding.scale !== undefined && d.embedding.scale !== 1) kinds.push('embedding:scale');
  if (d.finalLogitSoftcap !== undefined) kinds.push('head:logit-softcap');
  if (d.moe) {
    kinds.push('mlp:moe');
    if (d.moe.sharedExpertIntermediateSize !== undefined) kinds.push('mlp:moe-shared-expert');
    if (d.moe.sparseLayers.length < d.layers) kinds.push('mlp:moe-dense-layers');
  }
  return kinds;
}

/** Whether layer `index` has the mixture-of-experts MLP (`moe.sparseLayers`) rather than the dense one. */
export function isSparseLayer(d: ModelDescription, index: number): boolean {
  return d.moe?.sparseLayers.includes(index) ?? false;
}

/** Layer `index`'s tensors: `layerTensors`, or `moe.denseLayerTensors` on a dense layer of a mixture-of-experts model. */
export function layerTensorsOf<K extends string>(d: ModelDescription<K>, index: number): LayerTensorSpec<K>[] {
  if (!d.moe || d.moe.sparseLayers.includes(index)) return d.layerTensors;
  if (!d.moe.denseLayerTensors) throw new Error(`${d.name}: layer ${index} is dense but the description has no moe.denseLayerTensors`);
  return d.moe.denseLayerTensors;
}

/** The expert a sparse layer's tensor key belongs to (`expert.<e>.gateW` → e), or undefined for the layer's other tensors. */
export function expertOfTensor(key: string): number | undefined {
  const m = /^expert\.(\d+)\./.exec(key);
  return m ? Number(m[1]) : undefined;
}

/** Every layer tensor spec a layer of `d` may have (sparse and dense layers' together; keys never repeat between them). */
export function allLayerTensorSpecs<K extends string>(d: ModelDescription<K>): LayerTensorSpec<K>[] {
  return d.moe?.denseLayerTensors ? [...d.layerTensors, ...d.moe.denseLayerTensors] : d.layerTensors;
}

/**
 * Throws a clear error when `d` uses a kind `supported` lacks; `backend` names the backend in the message (and says
 * which backend computes it instead, when one is given).
 */
export function requireKinds(d: ModelDescription, backend: string, supported: readonly ModelKind[], instead?: string): void {
  const missing = modelKinds(d).filter((k) => !supported.includes(k));
  if (missing.length === 0) return;
  throw new UnsupportedKindsError(backend, missing, `${backend} does not compute ${missing.join(', ')} yet (${d.name} is a ${d.family} model)${instead ? `; ${instead}` : ''}`);
}

/**
 * A backend's refusal of a model whose kinds it does not compute (`requireKinds`, thrown by `init` before any work
 * starts): the default path catches it to fall back to a backend that computes them.
 */
export class UnsupportedKindsError extends Error {
  constructor(
    /** The refusing backend, as the message names it (`onnxruntime`, `the oneDNN backend`, `offloading`). */
    readonly backend: string,
    readonly missing: readonly ModelKind[],
    message: string,
  ) {
    super(message);
    this.name = 'UnsupportedKindsError';
  }
}

/**
 * One decoder layer's tensors by `description.layerTensors[].key`, Linear weights in the `[in, out]` layout the
 * backends compute with (what `DecoderBackend.loadLayer` and the streamed layers get). OPT's `LayerWeights` keys are one
 * instance; absent optional tensors (biases a family does not have) are simply missing keys.
 */
export type LayerTensors<K extends string = string> = Record<K, Float32Array>;

/**
 * Whether `d` is what the OPT compute path (OPT's checkpoint reader, layer tensors, kernels and graphs) computes:
 * learned positions with LayerNorm and a ReLU MLP, the kinds only OPT's layer has. Backends and loaders branch on this,
 * not on the family name, so a family whose description has these kinds needs no branch of its own.
 */
export function isOptShaped(d: ModelDescription): boolean {
  return d.positions.kind === 'learned' && d.norm.kind === 'layernorm' && d.mlp.kind === 'relu';
}

/** Float32 values one batch row adds to the KV cache per token and layer (keys and values of every KV head). */
export function kvValuesPerToken(d: ModelDescription): number {
  return 2 * d.attention.kvHeads * d.attention.headDim;
}

/** The token ids generation and prompts use, with the defaults for ids config.json leaves unset. */
export interface GenerationTokenIds {
  /** What pads a batch's short rows (unset: the eos id, else 0). */
  pad: number;
  /** What a prompt starts with where the family adds it (unset: the eos id, else 0). */
  bos: number;
  /** What ends a completion (unset: -1, which no token is, so rows stop only at their length). */
  eos: number;
}

/** `d`'s special token ids (`GenerationTokenIds`' defaults for unset ones). */
export function generationTokenIds(d: ModelDescription): GenerationTokenIds {
  return { pad: d.padTokenId ?? d.eosTokenId ?? 0, bos: d.bosTokenId ?? d.eosTokenId ?? 0, eos: d.eosTokenId ?? -1 };
}
