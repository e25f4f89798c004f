import type { LayerTensorSpec, MoeSpec } from '@flexhelm/contract';
import { HF_LIMITS, type HfConfigReader } from './hf-config-reader.js';
import { llamaStyleTensors, type LlamaStyleLayout, type RotaryLayerTensorKey } from './llama-style-tensors.js';

/** The keys of a sparse layer's MLP tensors (`ModelDescription.layerTensors` with `moe`). */
export type MoeLayerTensorKey =
  | 'routerW'
  | `expert.${number}.gateW` | `expert.${number}.upW` | `expert.${number}.downW`
  | 'sharedGateW' | 'sharedUpW' | 'sharedDownW' | 'sharedExpertGateW';

/** Where a family's checkpoint keeps a sparse layer's MLP (within `model.layers.<i>.`). */
export interface MoeCheckpointNames {
  /** The router Linear `[E, H]`. */
  router: string;
  /** Expert e's gate, up and down Linears. */
  expert: (e: number) => { gate: string; up: string; down: string };
  /** The shared expert's gate, up, down and its scalar gate `[1, H]` (Qwen2-MoE). */
  shared?: { gate: string; up: string; down: string; expertGate: string };
}

/** Most experts a layer may have: far above published models (Qwen2-57B-A14B: 64), small enough to refuse nonsense. */
export const MAX_EXPERTS = 1024;

/**
 * A sparse layer's tensors in the backends' `[in, out]` layout: the attention part and norms of the Llama-style
 * layout, then (all in the `mlp` object) the router `[H, E]`, each expert's SwiGLU `[H, Ie]`, `[H, Ie]`, `[Ie, H]` and,
 * with a shared expert, its SwiGLU `[H, Is]`… and its gate `[H, 1]`.
 */
export function moeLayerTensors(layout: LlamaStyleLayout, moe: Pick<MoeSpec, 'experts' | 'expertIntermediateSize' | 'sharedExpertIntermediateSize'>, names: MoeCheckpointNames): LayerTensorSpec<RotaryLayerTensorKey | MoeLayerTensorKey>[] {
  const H = layout.hidden;
  const Ie = moe.expertIntermediateSize;
  const dense = new Set<RotaryLayerTensorKey>(['gateW', 'gateB', 'upW', 'upB', 'downW', 'downB']);
  const specs: LayerTensorSpec<RotaryLayerTensorKey | MoeLayerTensorKey>[] = llamaStyleTensors(layout).filter((t) => !dense.has(t.key));
  const m = (key: MoeLayerTensorKey, shape: number[], checkpointSuffix: string) => specs.push({ key, shape, group: 'mlp', checkpointSuffix });
  m('routerW', [H, moe.experts], names.router);
  for (let e = 0; e < moe.experts; e++) {
    const n = names.expert(e);
    m(`expert.${e}.gateW`, [H, Ie], n.gate);
    m(`expert.${e}.upW`, [H, Ie], n.up);
    m(`expert.${e}.downW`, [Ie, H], n.down);
  }
  const Is = moe.sharedExpertIntermediateSize;
  if (Is !== undefined) {
    if (!names.shared) throw new Error('a shared expert needs its checkpoint names');
    m('sharedGateW', [H, Is], names.shared.gate);
    m('sharedUpW', [H, Is], names.shared.up);
    m('sharedDownW', [Is, H], names.shared.down);
    m('sharedExpertGateW', [H, 1], names.shared.expertGate);
  }
  return specs;
}

/** `num_experts_per_tok` from 1 to the expert count, and each expert's size, checked against the tensor limit. */
export function readExpertSizes(r: HfConfigReader, experts: number, topKDefault: number, intermediateKey: string, hidden: number): { topK: number; expertIntermediateSize: number } {
  const topK = r.int('num_experts_per_tok', experts, topKDefault);
  const expertIntermediateSize = r.int(intermediateKey, HF_LIMITS.intermediate_size);
  r.tensorSizes([[`expert gate_proj (${intermediateKey} × hidden_size)`, expertIntermediateSize * hidden], ['router (experts × hidden_size)', experts * hidden]]);
  return { topK, expertIntermediateSize };
}
