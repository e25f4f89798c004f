import { ModelFileError, type ModelDescription } from '@flexhelm/engine';

/**
 * How llama.cpp's files hold a sparse (mixture-of-experts) layer's MLP, by the description's keys (`FamilyGguf.experts`):
 *
 *   ffn_gate_inp        router                 dims [H, E]        (kept F32 by llama.cpp's converter and quantizer)
 *   ffn_gate_exps       every expert's gate    dims [H, Ie, E]    (expert e = the e-th outermost slice, HF [Ie, H])
 *   ffn_up_exps         every expert's up      dims [H, Ie, E]
 *   ffn_down_exps       every expert's down    dims [Ie, H, E]
 *   ffn_{gate,up,down}_shexp   the shared expert (Qwen2-MoE), plain matrices
 *   ffn_gate_inp_shexp  the shared expert's sigmoid gate, dims [H] (HF [1, H])
 *
 * Files from before llama.cpp merged the experts (early 2024 Mixtral conversions) hold each expert as its own matrix,
 * `ffn_gate.<e>`, `ffn_up.<e>`, `ffn_down.<e>`; those are read too, never written.
 */
const SINGLE: Readonly<Record<string, string>> = {
  ffn_gate_inp: 'routerW',
  ffn_gate_shexp: 'sharedGateW',
  ffn_up_shexp: 'sharedUpW',
  ffn_down_shexp: 'sharedDownW',
  ffn_gate_inp_shexp: 'sharedExpertGateW',
};
const PROJECTIONS = ['gate', 'up', 'down'] as const;
type Projection = (typeof PROJECTIONS)[number];

/** Where one checkpoint tensor of a sparse layer goes in a GGUF file. */
export interface ExpertTensorPlace {
  /** The GGUF tensor (`blk.N.ffn_gate_exps.weight`, `blk.N.ffn_gate_inp.weight`, …). */
  gguf: string;
  /** For an expert's matrix: its slice of the 3-D tensor. */
  expert?: number;
  /** The router and the shared expert's gate: F32 whatever the file type (llama.cpp never quantizes them). */
  keepF32: boolean;
  /** The shared expert's gate is written 1-D (`[H]`), as llama.cpp's graph reads it. */
  vector: boolean;
}

/** One sparse-layer tensor of a GGUF file as checkpoint tensors: the key(s) it holds and the expert slice of each. */
export interface ExpertTensorParts {
  layer: number;
  /** `[key, expert slice or undefined]` for each checkpoint tensor the GGUF tensor holds. */
  parts: [key: string, slice: number | undefined][];
}

/**
 * The GGUF place of every sparse-layer MLP tensor of `d`, by checkpoint name (`model.layers.3.block_sparse_moe.
 * experts.1.w1.weight` → `blk.3.ffn_gate_exps.weight`, slice 1). Dense layers' tensors are not listed.
 */
export function expertTensorPlaces(d: ModelDescription, layerPrefix: string): Map<string, ExpertTensorPlace> {
  const out = new Map<string, ExpertTensorPlace>();
  if (!d.moe) return out;
  const byKey = new Map(d.layerTensors.map((t) => [t.key as string, t.checkpointSuffix]));
  for (const layer of d.moe.sparseLayers) {
    const blk = `blk.${layer}.`;
    for (const [gguf, key] of Object.entries(SINGLE)) {
      const suffix = byKey.get(key);
      if (suffix) out.set(`${layerPrefix}${layer}.${suffix}`, { gguf: `${blk}${gguf}.weight`, keepF32: key === 'routerW' || key === 'sharedExpertGateW', vector: key === 'sharedExpertGateW' });
    }
    for (let e = 0; e < d.moe.experts; e++) {
      for (const p of PROJECTIONS) {
        const suffix = byKey.get(`expert.${e}.${p}W`);
        if (suffix) out.set(`${layerPrefix}${layer}.${suffix}`, { gguf: `${blk}ffn_${p}_exps.weight`, expert: e, keepF32: false, vector: false });
      }
    }
  }
  return out;
}

/**
 * What a GGUF tensor of a sparse layer holds (undefined: not a sparse-layer MLP tensor): the router, the shared
 * expert's tensors, every expert's slice of a merged `_exps` tensor, or one expert of a split file. The 3-D tensor's
 * expert count must be the file's `expert_count`.
 */
export function expertTensorParts(name: string, dims: readonly number[], d: ModelDescription, path: string): ExpertTensorParts | undefined {
  if (!d.moe) return undefined;
  const m = /^blk\.(\d+)\.([a-z_]+)(?:\.(\d+))?\.weight$/.exec(name);
  if (!m) return undefined;
  const layer = Number(m[1]);
  if (!d.moe.sparseLayers.includes(layer)) return undefined;
  const base = m[2]!;
  if (m[3] === undefined && SINGLE[base]) return { layer, parts: [[SINGLE[base]!, undefined]] };
  const merged = /^ffn_(gate|up|down)_exps$/.exec(base);
  if (merged && m[3] === undefined) {
    if (dims.length !== 3 || dims[2] !== d.moe.experts) throw new ModelFileError(`${path}: ${name} is ${dims.join(' × ')}; a layer of ${d.moe.experts} experts stores them as a 3-D tensor with ${d.moe.experts} outermost`);
    return { layer, parts: Array.from({ length: d.moe.experts }, (_, e) => [`expert.${e}.${merged[1] as Projection}W`, e]) };
  }
  const split = /^ffn_(gate|up|down)$/.exec(base);
  if (split && m[3] !== undefined) {
    const e = Number(m[3]);
    if (e >= d.moe.experts) throw new ModelFileError(`${path}: ${name} names expert ${e}; the file has ${d.moe.experts} experts`);
    return { layer, parts: [[`expert.${e}.${split[1] as Projection}W`, undefined]] };
  }
  return undefined;
}
