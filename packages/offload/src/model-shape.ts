import { expertOfTensor, isOptShaped, modelKinds, type ModelDescription, type ModelKind } from '@flexhelm/engine';

/**
 * What offloading, the memory plan and the cost model need to know about a model: its dimensions. Made only by
 * `modelShapeOfDescription` (a pure function of the description, every family's, OPT's included), so the plan, the
 * search and the profile key never see a model through a lossy copy of their own.
 */
export interface ModelShape {
  numLayers: number;
  hiddenSize: number;
  ffnDim: number;
  numHeads: number;
  vocabSize: number;
  /** Learned position rows excluding the offset of 2 (2048 for OPT). */
  maxPositions: number;
  /** opt-350m projects 512-wide embeddings in and out; undefined or equal to hiddenSize elsewhere. */
  wordEmbedProjDim?: number;
  /** Set for every family but OPT: the terms OPT's dimensions do not give. */
  family?: FamilyShape;
}

/** A non-OPT decoder's shape terms: its own per-layer tensors, GQA's key/value width, no position table, its head. */
export interface FamilyShape {
  /** Key/value heads (grouped-query attention: fewer than `numHeads`). */
  kvHeads: number;
  headDim: number;
  /** One decoder layer's tensors in the description's order, named by checkpoint suffix, `[out, in]` like OPT's list. */
  layerTensors: { name: string; shape: number[]; group: 'attention' | 'mlp'; expert?: number }[];
  /** The final norm's tensors (RMSNorm: its weight only; 0 without a final norm). */
  finalNorm: number;
  /** Gated MLP (SwiGLU, GeGLU-tanh): gate and up are two intermediates of `ffnDim`. */
  gatedMlp: boolean;
  /** The checkpoint ties the head to the embedding (offloading keeps a copy of its own either way). */
  tiedHead: boolean;
  /**
   * The kinds beyond a Llama layer's (`FAMILY_LAYER_BASE_KINDS`) that change what a layer computes (Gemma 2's soft-caps,
   * (1 + w) norms and four norms, OLMo 2's q/k norms, GeGLU): part of the profile key, so such a layer is timed itself.
   */
  extraKinds: ModelKind[];
  /** A mixture of experts: experts per sparse layer and how many each token picks (its expert tensors carry `expert`). */
  moe?: { experts: number; topK: number };
  /**
   * Tensors the compute backend holds in a compact form of its own (a GGUF file's ggml blocks on oneDNN): their bytes,
   * by `layerObjects`' tensor names (`layers.3.mlp.down_proj.weight`, `embed_tokens.weight`, `lm_head.weight`). A layer's
   * stay in that form on whatever tier holds them (never compressed); the token table and head stay resident in the
   * backend. Not part of the profile key: the plan counts them, the timing does not.
   */
  held?: Readonly<Record<string, number>>;
}

/**
 * Kinds every Llama-style layer profile already stood for (its key has no suffix for them), and kinds that do not change
 * a layer's cost (positions: the cos/sin tables are per step, not per weight).
 */
const FAMILY_LAYER_BASE_KINDS: readonly ModelKind[] = [
  'norm:rmsnorm', 'placement:pre', 'mlp:swiglu', 'positions:learned',
  'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope', 'attention:window',
];

/** The offloading shape of any model description (OPT's is its config's; other families carry `family`). */
export function modelShapeOfDescription(d: ModelDescription): ModelShape {
  const shape: ModelShape = {
    numLayers: d.layers,
    hiddenSize: d.hiddenSize,
    ffnDim: d.mlp.intermediateSize,
    numHeads: d.attention.heads,
    vocabSize: d.vocabSize,
    maxPositions: d.maxPositions,
    wordEmbedProjDim: d.embedding.dim,
  };
  if (isOptShaped(d)) return shape;
  return {
    ...shape,
    family: {
      kvHeads: d.attention.kvHeads,
      headDim: d.attention.headDim,
      layerTensors: d.layerTensors.map((t) => ({ name: t.checkpointSuffix, shape: [...t.shape].reverse(), group: t.group, ...expertField(t.key) })),
      finalNorm: !d.norm.final ? 0 : d.norm.kind === 'layernorm' ? 2 : 1,
      gatedMlp: d.mlp.kind === 'swiglu' || d.mlp.kind === 'geglu-tanh',
      tiedHead: d.embedding.tiedHead,
      extraKinds: modelKinds(d).filter((k) => !FAMILY_LAYER_BASE_KINDS.includes(k)),
      ...(d.moe ? { moe: { experts: d.moe.experts, topK: d.moe.topK } } : {}),
    },
  };
}

/**
 * Distinct experts a sparse layer's visit reads for `tokens` tokens if each picks its top-k uniformly at random:
 * `E·(1 − (1 − k/E)^tokens)` (real routers are skewed, so fewer: the offloading backend measures its own).
 */
export function expectedDistinctExperts(moe: { experts: number; topK: number }, tokens: number): number {
  return moe.experts * (1 - (1 - moe.topK / moe.experts) ** tokens);
}

/**
 * A step reads a sparse layer's experts on demand (the router's picks only) when it is expected to choose at most this
 * share of them; above it the whole layer streams as one read, overlapped with the previous layer's compute.
 */
export const EXPERTS_ON_DEMAND_SHARE = 0.8;

/** The share of a sparse layer's expert bytes a step reads when it is expected to choose `expected` distinct experts. */
export function expertReadShare(moe: { experts: number }, expected: number): number {
  return expected <= EXPERTS_ON_DEMAND_SHARE * moe.experts ? expected / moe.experts : 1;
}

/** A sparse layer's expert tensor carries its expert (its placement unit). */
function expertField(key: string): { expert?: number } {
  const expert = expertOfTensor(key);
  return expert === undefined ? {} : { expert };
}

/** Values one sequence's KV cache holds per token and layer (keys and values of every KV head). */
export function kvWidth(shape: ModelShape): number {
  return shape.family ? 2 * shape.family.kvHeads * shape.family.headDim : 2 * shape.hiddenSize;
}

/** Values of one decoder layer's tensors (its attention and MLP objects, as the description lists them). */
export function layerElements(shape: ModelShape): number {
  return layerObjects({ ...shape, numLayers: 1 })
    .filter((o) => o.name === 'attention_0' || o.name === 'mlp_0')
    .reduce((a, o) => a + o.tensors.reduce((b, t) => b + numel(t.shape), 0), 0);
}

/** Width of the queries and of the attention output, heads × head_dim: the hidden size except where head_dim is set apart (Gemma 2: 8 × 256 with hidden 2304). */
export function attentionWidth(shape: ModelShape): number {
  return shape.family ? shape.numHeads * shape.family.headDim : shape.hiddenSize;
}

/** One weight tensor of a FlexLLMGen layer object, in the order `init_weight_list` sees them. */
export interface TensorSpec {
  name: string;
  shape: number[];
  /** The unit it is placed with (a sparse layer's expert index): tensors sharing one share a tier. */
  unit?: number;
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * The weight tensors of each FlexLLMGen layer object, in FlexLLMGen's order (spec §3.1): InputEmbed
 * `[tok, pos]`, per decoder layer an attention object `[w_q, b_q, w_k, b_k, w_v, b_v, w_out, b_out, ln_w, ln_b]`
 * and an MLP object `[w1, b1, w2, b2, ln_w, ln_b]`, and OutputEmbed `[ln_w, ln_b, tok]`: its table is tied to the input
 * embedding's, but like FlexLLMGen flexhelm keeps a copy per object (each on its own tiers), so it is listed (and
 * counted) twice. Names are Hugging Face's without the `model.` prefix.
 */
export function layerObjects(shape: ModelShape): { name: string; tensors: TensorSpec[] }[] {
  if (shape.family) return familyObjects(shape, shape.family);
  const h = shape.hiddenSize;
  const e = shape.wordEmbedProjDim ?? h;
  const input: TensorSpec[] = [
    { name: 'decoder.embed_tokens.weight', shape: [shape.vocabSize, e] },
    { name: 'decoder.embed_positions.weight', shape: [shape.maxPositions + 2, h] },
  ];
  if (e !== h) input.push({ name: 'decoder.project_in.weight', shape: [h, e] });
  const objects = [{ name: 'input_embed', tensors: input }];
  for (let i = 0; i < shape.numLayers; i++) {
    const p = `decoder.layers.${i}`;
    objects.push({
      name: `attention_${i}`,
      tensors: [
        { name: `${p}.self_attn.q_proj.weight`, shape: [h, h] },
        { name: `${p}.self_attn.q_proj.bias`, shape: [h] },
        { name: `${p}.self_attn.k_proj.weight`, shape: [h, h] },
        { name: `${p}.self_attn.k_proj.bias`, shape: [h] },
        { name: `${p}.self_attn.v_proj.weight`, shape: [h, h] },
        { name: `${p}.self_attn.v_proj.bias`, shape: [h] },
        { name: `${p}.self_attn.out_proj.weight`, shape: [h, h] },
        { name: `${p}.self_attn.out_proj.bias`, shape: [h] },
        { name: `${p}.self_attn_layer_norm.weight`, shape: [h] },
        { name: `${p}.self_attn_layer_norm.bias`, shape: [h] },
      ],
    });
    objects.push({
      name: `mlp_${i}`,
      tensors: [
        { name: `${p}.fc1.weight`, shape: [shape.ffnDim, h] },
        { name: `${p}.fc1.bias`, shape: [shape.ffnDim] },
        { name: `${p}.fc2.weight`, shape: [h, shape.ffnDim] },
        { name: `${p}.fc2.bias`, shape: [h] },
        { name: `${p}.final_layer_norm.weight`, shape: [h] },
        { name: `${p}.final_layer_norm.bias`, shape: [h] },
      ],
    });
  }
  const output: TensorSpec[] = [];
  // opt-350m (post-LN, projected embeddings) has no final layer norm; the others have one.
  if (e === h) {
    output.push({ name: 'decoder.final_layer_norm.weight', shape: [h] }, { name: 'decoder.final_layer_norm.bias', shape: [h] });
  } else {
    output.push({ name: 'decoder.project_out.weight', shape: [e, h] });
  }
  output.push({ name: 'lm_head.weight', shape: [shape.vocabSize, e] });
  objects.push({ name: 'output_embed', tensors: output });
  return objects;
}

/**
 * A non-OPT family's layer objects: InputEmbed is the token table only (rotary positions have no table), each decoder
 * layer's attention and MLP objects list the description's tensors in its order (its k/v sized by the KV heads, gate/up/
 * down), and OutputEmbed `[norm, head]` has its own table whether or not the checkpoint ties it (a copy when tied, as
 * for OPT).
 */
function familyObjects(shape: ModelShape, f: FamilyShape): { name: string; tensors: TensorSpec[] }[] {
  const h = shape.hiddenSize;
  const objects = [{ name: 'input_embed', tensors: [{ name: 'embed_tokens.weight', shape: [shape.vocabSize, h] }] }];
  for (let i = 0; i < shape.numLayers; i++) {
    for (const group of ['attention', 'mlp'] as const) {
      const tensors = f.layerTensors.filter((t) => t.group === group).map((t) => ({ name: `layers.${i}.${t.name}`, shape: t.shape, unit: t.expert }));
      objects.push({ name: `${group}_${i}`, tensors });
    }
  }
  const output: TensorSpec[] = [];
  if (f.finalNorm >= 1) output.push({ name: 'norm.weight', shape: [h] });
  if (f.finalNorm === 2) output.push({ name: 'norm.bias', shape: [h] });
  output.push({ name: 'lm_head.weight', shape: [shape.vocabSize, h] });
  objects.push({ name: 'output_embed', tensors: output });
  return objects;
}
