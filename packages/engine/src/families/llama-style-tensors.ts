import type { LayerTensorSpec } from '@flexhelm/contract';

/** The keys of a Llama-style decoder layer's tensors (see `ModelDescription.layerTensors`). */
export type RotaryLayerTensorKey =
  | 'qW' | 'qB' | 'kW' | 'kB' | 'vW' | 'vB' | 'oW' | 'oB'
  | 'inNormW' | 'postNormW' | 'attnOutNormW' | 'mlpOutNormW' | 'qNormW' | 'kNormW'
  | 'gateW' | 'gateB' | 'upW' | 'upB' | 'downW' | 'downB';

/** What differs between the Llama-style families' layer tensors. */
export interface LlamaStyleLayout {
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  /** Biases on q/k/v, on o, on the MLP projections. */
  qkvBias?: boolean;
  outBias?: boolean;
  mlpBias?: boolean;
  /** Checkpoint names (within `model.layers.<i>.`) of the norms the family has, by key. */
  norms: Partial<Record<'inNormW' | 'postNormW' | 'attnOutNormW' | 'mlpOutNormW' | 'qNormW' | 'kNormW', string>>;
  /** Phi-3: q/k/v are row blocks of one `self_attn.qkv_proj.weight`, gate/up of one `mlp.gate_up_proj.weight`. */
  fused?: boolean;
}

/**
 * The layer tensors of a Llama-style family in the backends' `[in, out]` layout with their checkpoint names
 * (`[out, in]` there); a fused checkpoint tensor is named by every key it holds, each with its rows.
 */
export function llamaStyleTensors(l: LlamaStyleLayout): LayerTensorSpec<RotaryLayerTensorKey>[] {
  const { hidden: H, heads, kvHeads, headDim: hd, intermediate: I } = l;
  const Q = heads * hd;
  const KV = kvHeads * hd;
  type Spec = LayerTensorSpec<RotaryLayerTensorKey>;
  const spec = (group: Spec['group'], key: RotaryLayerTensorKey, shape: number[], checkpointSuffix: string, checkpointRows?: [number, number]): Spec =>
    checkpointRows ? { key, shape, group, checkpointSuffix, checkpointRows } : { key, shape, group, checkpointSuffix };
  const a = (key: RotaryLayerTensorKey, shape: number[], suffix: string, rows?: [number, number]) => spec('attention', key, shape, suffix, rows);
  const m = (key: RotaryLayerTensorKey, shape: number[], suffix: string, rows?: [number, number]) => spec('mlp', key, shape, suffix, rows);
  const norm = (group: Spec['group'], key: keyof LlamaStyleLayout['norms'], size: number): Spec[] => {
    const name = l.norms[key];
    return name ? [spec(group, key, [size], name)] : [];
  };
  const qkv = l.fused ? 'self_attn.qkv_proj.weight' : undefined;
  const gateUp = l.fused ? 'mlp.gate_up_proj.weight' : undefined;
  return [
    ...norm('attention', 'inNormW', H),
    a('qW', [H, Q], qkv ?? 'self_attn.q_proj.weight', qkv ? [0, Q] : undefined),
    ...(l.qkvBias ? [a('qB', [Q], 'self_attn.q_proj.bias')] : []),
    a('kW', [H, KV], qkv ?? 'self_attn.k_proj.weight', qkv ? [Q, Q + KV] : undefined),
    ...(l.qkvBias ? [a('kB', [KV], 'self_attn.k_proj.bias')] : []),
    a('vW', [H, KV], qkv ?? 'self_attn.v_proj.weight', qkv ? [Q + KV, Q + 2 * KV] : undefined),
    ...(l.qkvBias ? [a('vB', [KV], 'self_attn.v_proj.bias')] : []),
    ...norm('attention', 'qNormW', Q),
    ...norm('attention', 'kNormW', KV),
    a('oW', [Q, H], 'self_attn.o_proj.weight'),
    ...(l.outBias ? [a('oB', [H], 'self_attn.o_proj.bias')] : []),
    ...norm('attention', 'attnOutNormW', H),
    ...norm('mlp', 'postNormW', H),
    m('gateW', [H, I], gateUp ?? 'mlp.gate_proj.weight', gateUp ? [0, I] : undefined),
    ...(l.mlpBias ? [m('gateB', [I], 'mlp.gate_proj.bias')] : []),
    m('upW', [H, I], gateUp ?? 'mlp.up_proj.weight', gateUp ? [I, 2 * I] : undefined),
    ...(l.mlpBias ? [m('upB', [I], 'mlp.up_proj.bias')] : []),
    m('downW', [I, H], 'mlp.down_proj.weight'),
    ...(l.mlpBias ? [m('downB', [H], 'mlp.down_proj.bias')] : []),
    ...norm('mlp', 'mlpOutNormW', H),
  ];
}

/** Checkpoint names outside the layers, as the Llama-style families' `save_pretrained` writes them. */
export function llamaStyleCheckpointNames(tied: boolean): { embedding: string; layerPrefix: string; finalNorm: string; head?: string } {
  return { embedding: 'model.embed_tokens.weight', layerPrefix: 'model.layers.', finalNorm: 'model.norm.weight', ...(tied ? {} : { head: 'lm_head.weight' }) };
}
