import { describeHfConfig, FAMILY_REGISTRY, ModelFileError, type FamilyEntry, type FamilyGguf, type ModelDescription, type TensorToWrite } from '@flexhelm/engine';
import { expertTensorParts } from './gguf-experts.js';
import { GgufMetadata } from './gguf-metadata.js';
import { readGgufTensor, readGgufTensorBytes, type TensorSlice } from './read-gguf-tensor.js';
import { shortestFloat32, type GgufFile, type GgufTensorInfo } from './read-gguf.js';

/** The families llama.cpp's files hold (`gguf` in their registry entry), in registry order. */
const GGUF_FAMILIES: readonly (FamilyEntry & { gguf: FamilyGguf })[] = [...FAMILY_REGISTRY.values()].filter((f): f is FamilyEntry & { gguf: FamilyGguf } => f.gguf !== undefined);

/**
 * `general.architecture` values read, and the `model_type` a file without experts becomes (Mistral files say `llama`,
 * and read as Llama; a `llama` file with experts reads as Mixtral, `importedFamily`).
 */
export const GGUF_ARCHITECTURES: Readonly<Record<string, string>> = (() => {
  const out: Record<string, string> = {};
  for (const experts of [false, true]) for (const f of GGUF_FAMILIES) if (f.gguf.imports && Boolean(f.gguf.experts) === experts) out[f.gguf.architecture] ??= f.modelType;
  return out;
})();

/** The family a file of `arch` imports as, with experts or without (undefined: no family reads it). */
export function importedFamily(arch: string, experts: boolean): (FamilyEntry & { gguf: FamilyGguf }) | undefined {
  return GGUF_FAMILIES.find((f) => f.gguf.imports && f.gguf.architecture === arch && Boolean(f.gguf.experts) === experts);
}

/** The family of a GGUF file's model: its `general.architecture`, and whether `<architecture>.expert_count` is above 0. */
export function fileFamily(file: GgufFile): { arch: string; experts: boolean; family: FamilyEntry & { gguf: FamilyGguf } } {
  const m = new GgufMetadata(file);
  const arch = m.string('general.architecture');
  if (arch === undefined) throw new ModelFileError(`${file.path}: metadata general.architecture is missing; it is not a model file llama.cpp would load`);
  const expertCount = m.number(`${arch}.expert_count`, 0);
  if (!Number.isInteger(expertCount) || expertCount < 0) throw m.fail(`${arch}.expert_count`, `is ${expertCount}; it must be a whole number`);
  const experts = expertCount > 0;
  const family = importedFamily(arch, experts);
  if (family) return { arch, experts, family };
  if (importedFamily(arch, !experts)) {
    throw new ModelFileError(`${file.path}: ${arch} files are read ${experts ? 'without' : 'with'} experts; this one has ${experts ? `${expertCount} (${arch}.expert_count)` : 'none'}`);
  }
  throw new ModelFileError(`${file.path}: architecture ${JSON.stringify(arch)} is not read; supported: ${Object.keys(GGUF_ARCHITECTURES).join(', ')}`);
}

/** The GGUF form of the family `modelType` names (export), or undefined when llama.cpp has none for it. */
export function familyGguf(modelType: string): FamilyGguf | undefined {
  return GGUF_FAMILIES.find((f) => f.modelType === modelType)?.gguf;
}

/** llama.cpp's per-layer tensor names (within `blk.N.`) → the Hugging Face names (within `model.layers.N.`). */
const LAYER_NAMES: Record<string, string> = {
  attn_norm: 'input_layernorm',
  attn_q: 'self_attn.q_proj',
  attn_k: 'self_attn.k_proj',
  attn_v: 'self_attn.v_proj',
  attn_output: 'self_attn.o_proj',
  ffn_norm: 'post_attention_layernorm',
  ffn_gate: 'mlp.gate_proj',
  ffn_up: 'mlp.up_proj',
  ffn_down: 'mlp.down_proj',
};
const GLOBAL_NAMES: Record<string, string> = { 'token_embd.weight': 'model.embed_tokens.weight', 'output_norm.weight': 'model.norm.weight', 'output.weight': 'lm_head.weight' };

/** What a GGUF file becomes: a config.json object and the checkpoint tensors, each read from the file when written. */
export interface GgufModel {
  architecture: string;
  config: Record<string, unknown>;
  tensors: TensorToWrite[];
}

/**
 * llama.cpp's converter reorders each head's q/k rows for its interleaved (GPT-J) rotary: HF row `i·hd/2 + j` of half
 * `i` becomes row `2j + i`. This puts them back, per head, for a `[heads·hd, cols]` row-major matrix (or a bias).
 */
export function unpermuteRotary<T extends Float32Array | Uint8Array>(values: T, heads: number, cols: number): T {
  const rows = values.length / cols;
  const hd = rows / heads;
  if (!Number.isInteger(hd) || hd % 2 !== 0) throw new ModelFileError(`cannot undo llama.cpp's rotary permutation: ${rows} rows are not ${heads} heads of an even size`);
  // Quantized rows move as whole rows of blocks (a Uint8Array, cols bytes per row): the blocks run along the input.
  const out = (values instanceof Uint8Array ? new Uint8Array(values.length) : new Float32Array(values.length)) as T;
  const half = hd / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < 2; i++) {
      for (let j = 0; j < half; j++) {
        const from = (h * hd + 2 * j + i) * cols;
        out.set(values.subarray(from, from + cols), (h * hd + i * half + j) * cols);
      }
    }
  }
  return out;
}

/** Llama 3.1's rope scaling (the one llama.cpp stores as a `rope_freqs` tensor) recovered from that tensor. */
function llama3ScalingFromFactors(factors: Float32Array, theta: number, headDim: number, path: string): Record<string, unknown> {
  const factor = shortestFloat32(Math.max(...factors));
  // Llama 3.1/3.2/3.3 publish low 1, high 4, original context 8192; the context is searched over powers of two (small
  // test models use others). Factors that fit none are refused rather than run with a guess.
  const candidates = Array.from({ length: 15 }, (_, k) => [1, 4, 2 ** (k + 6)] as const);
  for (const [low, high, original] of candidates) {
    const lowWave = original / low;
    const highWave = original / high;
    const fits = [...factors].every((f, i) => {
      const wave = (2 * Math.PI) / (1 / theta ** ((2 * i) / headDim));
      const smooth = (original / wave - low) / (high - low);
      const want = wave < highWave ? 1 : wave > lowWave ? factor : 1 / ((1 - smooth) / factor + smooth);
      return Math.abs(f - want) <= 1e-5 * want;
    });
    if (fits) return { rope_type: 'llama3', factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: original };
  }
  throw new ModelFileError(`${path}: rope_freqs.weight holds rotary frequency factors that are not Llama 3.1's (factor ${factor}, low 1, high 4, an original context of 64 to 2^20 positions); other factors are not read`);
}

/**
 * A GGUF file's model as a Hugging Face checkpoint: config.json from `<arch>.*` metadata (sizes, rope, norms' epsilon,
 * Gemma 2's soft-caps and window, Phi-3's longrope factors) and tensors renamed from llama.cpp's names, with its
 * rotary permutation of llama q/k undone and Gemma's stored `1 + w` norms put back to `w`. Tensors stay F32/F16/BF16
 * as stored; quantised ones are dequantised to F32 (exact).
 */
export function ggufModel(file: GgufFile): GgufModel {
  const m = new GgufMetadata(file);
  const { arch, family } = fileFamily(file);
  const { modelType, gguf: g } = family;
  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  const embd = byName.get('token_embd.weight');
  if (embd?.dims.length !== 2) throw new ModelFileError(`${file.path}: no 2-D tensor token_embd.weight (the token embeddings)`);
  const a = (key: string) => `${arch}.${key}`;
  const hidden = m.count(a('embedding_length'));
  const layers = m.count(a('block_count'));
  const heads = m.count(a('attention.head_count'));
  const kvHeads = m.count(a('attention.head_count_kv'), heads);
  const headDim = m.count(a('attention.key_length'), Math.floor(hidden / heads));
  const vocab = m.count(a('vocab_size'), embd.dims[1]);
  if (embd.dims[0] !== hidden || embd.dims[1] !== vocab) throw new ModelFileError(`${file.path}: token_embd.weight is ${embd.dims.join(' × ')}; the metadata says ${hidden} × ${vocab}`);
  // Rotary over part of each head (rope.dimension_count below head_dim) is not a layout the engine computes.
  const ropeDims = m.count(a('rope.dimension_count'), headDim);
  if (ropeDims !== headDim) throw m.fail(a('rope.dimension_count'), `is ${ropeDims}; only rotary over the whole head (${headDim}) is computed`);
  const theta = m.number(a('rope.freq_base'), 10000);
  const config: Record<string, unknown> = {
    model_type: modelType,
    vocab_size: vocab,
    hidden_size: hidden,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    intermediate_size: m.count(a('feed_forward_length')),
    max_position_embeddings: m.count(a('context_length')),
    rms_norm_eps: m.number(a('attention.layer_norm_rms_epsilon'), g.rmsNormEps),
    rope_theta: theta,
    tie_word_embeddings: !byName.has('output.weight'),
    torch_dtype: 'float32',
  };
  const name = m.string('general.name');
  if (name) config._name_or_path = name;
  const bos = m.number('tokenizer.ggml.bos_token_id', undefined);
  const eos = m.number('tokenizer.ggml.eos_token_id', undefined);
  const pad = m.number('tokenizer.ggml.padding_token_id', undefined);
  if (bos !== undefined) config.bos_token_id = bos;
  if (eos !== undefined) config.eos_token_id = eos;
  if (pad !== undefined) config.pad_token_id = pad;
  if (g.headDimKey) config.head_dim = headDim;
  else if (headDim !== hidden / heads) throw new ModelFileError(`${file.path}: ${a('attention.key_length')} is ${headDim}, but ${arch} has head_dim = embedding_length / head_count = ${hidden / heads}`);
  const consumed = new Set<string>();
  const scalingType = m.string(a('rope.scaling.type'));
  if (scalingType === 'linear') config.rope_scaling = { rope_type: 'linear', factor: m.number(a('rope.scaling.factor')) };
  else if (scalingType !== undefined && scalingType !== 'none') throw m.fail(a('rope.scaling.type'), `is ${JSON.stringify(scalingType)}; only "linear" and "none" are read`);
  const ropeFreqs = byName.get('rope_freqs.weight');
  if (ropeFreqs) {
    consumed.add(ropeFreqs.name);
    if (!g.llamaExtras || ropeFreqs.elements !== headDim / 2) throw new ModelFileError(`${file.path}: rope_freqs.weight is only read for llama, with head_dim / 2 = ${headDim / 2} values`);
    config.rope_scaling = llama3ScalingFromFactors(readGgufTensor(file, ropeFreqs), theta, headDim, file.path);
  }
  if (g.llamaExtras) {
    config.attention_bias = byName.has('blk.0.attn_q.bias');
    config.mlp_bias = byName.has('blk.0.ffn_gate.bias');
  }
  if (g.readConfig) Object.assign(config, g.readConfig({ number: (k) => m.number(a(k), undefined), count: (k) => m.count(a(k), undefined) }, { layers, hidden, heads, headDim }));
  if (g.slidingWindow) config.sliding_window = m.count(a('attention.sliding_window'), undefined) ?? null;
  if (g.longropeFactors) {
    const long = byName.get('rope_factors_long.weight');
    const short = byName.get('rope_factors_short.weight');
    if (long || short) {
      if (!long || !short) throw new ModelFileError(`${file.path}: Phi-3 longrope needs both rope_factors_long.weight and rope_factors_short.weight`);
      consumed.add(long.name).add(short.name);
      config.original_max_position_embeddings = m.count(a('rope.scaling.original_context_length'));
      // Stored as float32: written as the shortest decimals of those, as the config they came from had them.
      config.rope_scaling = { type: 'longrope', long_factor: Array.from(readGgufTensor(file, long), shortestFloat32), short_factor: Array.from(readGgufTensor(file, short), shortestFloat32) };
    }
  }
  const layerNames = { ...LAYER_NAMES, ...g.layerNames };
  const tensors: TensorToWrite[] = [];
  // A file with experts: the sparse layers' MLP tensors go by the description's keys (`expertTensorParts`).
  const sparse = g.experts ? sparseDescription(m, a, config, file.path) : undefined;
  for (const t of file.tensors) {
    if (consumed.has(t.name)) continue;
    const moe = sparse && expertTensorParts(t.name, t.dims, sparse, file.path);
    if (moe) {
      for (const [key, slice] of moe.parts) {
        const spec = sparse.layerTensors.find((s) => s.key === key)!;
        const shape = [...spec.shape].reverse();
        const of = slice === undefined ? 1 : sparse.moe!.experts;
        if (shape.reduce((x, y) => x * y, 1) * of !== t.elements) throw new ModelFileError(`${file.path}: ${t.name} is ${t.dims.join(' × ')}; ${key} of layer ${moe.layer} is ${shape.join(' × ')}${of > 1 ? ` for each of ${of} experts` : ''}`);
        tensors.push(checkpointTensor(file, t, `${sparse.checkpointNames!.layerPrefix}${moe.layer}.${spec.checkpointSuffix}`, shape, undefined, slice === undefined ? undefined : { index: slice, of }));
      }
      continue;
    }
    const hfName = hfTensorName(t.name, layerNames, layers);
    if (!hfName) throw new ModelFileError(`${file.path}: tensor ${t.name} is not one a ${arch} model has`);
    const shape = [...t.dims].reverse();
    const isNorm = /norm\.weight$/.test(hfName) && !/self_attn\.[qk]_norm/.test(hfName);
    let transform: ((v: Float32Array) => Float32Array) | undefined;
    // Only llama-architecture files are permuted (llama.cpp's other architectures here use NeoX rotary).
    if (g.permutedRotary && /\.(q_proj|k_proj)\./.test(hfName)) {
      const n = hfName.includes('.q_proj.') ? heads : kvHeads;
      transform = (v) => unpermuteRotary(v, n, t.dims.length === 2 ? t.dims[0]! : 1);
    } else if (g.normPlusOne && isNorm) {
      transform = (v) => v.map((x) => x - 1);
    }
    tensors.push(checkpointTensor(file, t, hfName, shape, transform));
  }
  return { architecture: arch, config, tensors };
}

/** The GGUF name llama.cpp gives a Hugging Face checkpoint tensor of `arch` (the inverse of the reading map). */
export function ggufTensorName(hfName: string, arch: string): string | undefined {
  return ggufTensorNameIn(hfName, (importedFamily(arch, false) ?? importedFamily(arch, true))?.gguf.layerNames ?? {});
}

/** `ggufTensorName` with the family's own layer names (`FamilyGguf.layerNames`) given. */
export function ggufTensorNameIn(hfName: string, ownNames: Readonly<Record<string, string>>): string | undefined {
  for (const [gguf, hf] of Object.entries(GLOBAL_NAMES)) if (hf === hfName) return gguf;
  const match = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hfName);
  if (!match) return undefined;
  const names = { ...LAYER_NAMES, ...ownNames };
  // The architecture's own names first: its post_attention_layernorm may be a different GGUF tensor than llama's.
  const own = Object.entries(ownNames).find(([, hf]) => hf === match[2]);
  const found = own ?? Object.entries(names).find(([g, hf]) => hf === match[2] && names[g] === hf);
  return found ? `blk.${match[1]}.${found[0]}.${match[3]}` : undefined;
}

function hfTensorName(name: string, layerNames: Record<string, string>, layers: number): string | undefined {
  if (GLOBAL_NAMES[name]) return GLOBAL_NAMES[name];
  const match = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(name);
  if (!match) return undefined;
  const layer = Number(match[1]);
  const hf = layerNames[match[2]!];
  if (!hf || layer >= layers) return undefined;
  return `model.layers.${layer}.${hf}.${match[3]}`;
}

/** The description of a file with experts (for its sparse layers' keys); llama.cpp needs `expert_used_count` with them. */
function sparseDescription(m: GgufMetadata, a: (key: string) => string, config: Record<string, unknown>, path: string): ModelDescription {
  m.count(a('expert_used_count'));
  const d = describeHfConfig(config, `${path} (its metadata as config.json)`);
  if (!d.moe || !d.checkpointNames) throw new ModelFileError(`${path}: ${a('expert_count')} says the model has experts, but ${config.model_type} read from its metadata has none`);
  return d;
}

/**
 * Stored F32/F16/BF16 stay as they are (copied bytes); quantised or transformed tensors become F32. `slice`: one
 * expert's part of a merged expert tensor.
 */
function checkpointTensor(file: GgufFile, t: GgufTensorInfo, name: string, shape: number[], transform?: (v: Float32Array) => Float32Array, slice?: TensorSlice): TensorToWrite {
  if (!transform && (t.type === 'F32' || t.type === 'F16' || t.type === 'BF16')) {
    return {
      name,
      shape,
      dtype: t.type,
      data: () => {
        const b = readGgufTensorBytes(file, t, slice);
        return t.type === 'F32' ? new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4) : new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2);
      },
    };
  }
  return { name, shape, dtype: 'F32', data: () => (transform ?? ((v: Float32Array) => v))(readGgufTensor(file, t, slice)) };
}
