import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LLAMA3_SPLIT, QWEN2_SPLIT } from '@flexhelm/tokenizer';
import { FAMILY_REGISTRY, ModelFileError, openTensorSource, readModelDescription, type FamilyGguf, type GgufKeyValue, type ModelDescription } from '@flexhelm/engine';
import { type ExpertTensorPlace, expertTensorPlaces } from './gguf-experts.js';
import { familyGguf, ggufTensorNameIn } from './gguf-model.js';
import { GGML_SENTENCEPIECE, ggmlPreName, TOKEN_TYPE } from './gguf-tokenizer.js';
import { type GgufTensorToWrite, type GgufWriteValue, writeGguf } from './gguf-writer.js';
import { type KQuantMix, kQuantMixType } from './k-quant-mix.js';
import { type QuantizeType, quantize } from './quantize.js';

/** The file types `export-gguf` writes: one type for every matrix, or llama.cpp's K-quant mixes (`kQuantMixType`). */
export type ExportType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | KQuantMix;
export const EXPORT_TYPES: readonly ExportType[] = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K_M', 'Q5_K_M'];
const isMix = (t: ExportType): t is KQuantMix => t === 'Q4_K_M' || t === 'Q5_K_M';

export interface ExportGgufOptions {
  /** A model folder (config.json, safetensors, tokenizer.json). */
  folder: string;
  out: string;
  type: ExportType;
  log?: (message: string) => void;
}

/** llama.cpp's rotary permutation of llama q/k rows (per head: halves → interleaved pairs); undone by `unpermuteRotary`. */
export function permuteRotary(values: Float32Array, heads: number, cols: number): Float32Array {
  const hd = values.length / cols / heads;
  const half = hd / 2;
  const out = new Float32Array(values.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < 2; i++) {
      for (let j = 0; j < half; j++) {
        const from = (h * hd + i * half + j) * cols;
        out.set(values.subarray(from, from + cols), (h * hd + 2 * j + i) * cols);
      }
    }
  }
  return out;
}

/** Llama 3.1 rope scaling as llama.cpp stores it: one frequency divisor per rotary pair (`rope_freqs.weight`). */
function llama3Factors(d: ModelDescription): Float32Array {
  const s = d.positions.kind === 'rope' ? d.positions.scaling : undefined;
  if (s?.kind !== 'llama3' || d.positions.kind !== 'rope') throw new Error('llama3Factors: not a llama3-scaled model');
  const hd = d.attention.headDim;
  const out = new Float32Array(hd / 2);
  for (let i = 0; i < hd / 2; i++) {
    const wave = 2 * Math.PI * d.positions.theta ** ((2 * i) / hd);
    const smooth = (s.originalMaxPositions / wave - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    out[i] = wave < s.originalMaxPositions / s.highFreqFactor ? 1 : wave > s.originalMaxPositions / s.lowFreqFactor ? s.factor : 1 / ((1 - smooth) / s.factor + smooth);
  }
  return out;
}

/**
 * Writes a model folder as one GGUF file for llama.cpp (all or nothing): `general.*`, `<arch>.*` hyper-parameters,
 * the tokenizer (`tokenizer.ggml.*` from tokenizer.json, chat template from tokenizer_config.json) and the tensors
 * under llama.cpp's names and layouts, matrices in `type` (rows not of whole 32-value blocks fall back to F16; the
 * K-quant mixes pick per matrix as llama.cpp does, with plain-range K-quant blocks, not llama-quantize's search),
 * 1-D tensors in F32 — what llama.cpp's converter writes. `importGguf` reads it back to the same model.
 */
export function exportGguf(o: ExportGgufOptions): { tensors: number; warnings: string[] } {
  if (!EXPORT_TYPES.includes(o.type)) throw new ModelFileError(`export-gguf: type ${JSON.stringify(o.type)} is not written; one of ${EXPORT_TYPES.join(', ')}`);
  const d = readModelDescription(o.folder);
  const g = familyGguf(d.family);
  if (!g) throw new ModelFileError(`export-gguf: ${d.family} models have no llama.cpp architecture; exportable: ${[...FAMILY_REGISTRY.values()].filter((f) => f.gguf).map((f) => f.modelType).join(', ')}`);
  const arch = g.architecture;
  const config = JSON.parse(readFileSync(join(o.folder, 'config.json'), 'utf8')) as Record<string, unknown>;
  const warnings: string[] = [];
  const a = (k: string) => `${arch}.${k}`;
  const md: [string, GgufWriteValue][] = [
    ['general.architecture', { type: 'string', value: arch }],
    ['general.name', { type: 'string', value: d.name }],
    ['general.file_type', { type: 'u32', value: { F32: 0, F16: 1, BF16: 32, Q8_0: 7, Q4_0: 2, Q4_K_M: 15, Q5_K_M: 17 }[o.type] }],
    [a('context_length'), { type: 'u32', value: d.maxPositions }],
    [a('embedding_length'), { type: 'u32', value: d.hiddenSize }],
    [a('block_count'), { type: 'u32', value: d.layers }],
    [a('feed_forward_length'), { type: 'u32', value: d.mlp.intermediateSize }],
    [a('attention.head_count'), { type: 'u32', value: d.attention.heads }],
    [a('attention.head_count_kv'), { type: 'u32', value: d.attention.kvHeads }],
    [a('attention.key_length'), { type: 'u32', value: d.attention.headDim }],
    [a('attention.value_length'), { type: 'u32', value: d.attention.headDim }],
    [a('attention.layer_norm_rms_epsilon'), { type: 'f32', value: d.norm.eps }],
    [a('vocab_size'), { type: 'u32', value: d.vocabSize }],
  ];
  if (d.positions.kind !== 'rope') throw new ModelFileError(`export-gguf: ${d.family} has no rotary positions`);
  md.push([a('rope.freq_base'), { type: 'f32', value: d.positions.theta }], [a('rope.dimension_count'), { type: 'u32', value: d.attention.headDim }]);
  const extra: GgufTensorToWrite[] = [];
  const f32Tensor = (name: string, v: Float32Array): GgufTensorToWrite => ({ name, dims: [v.length], type: 'F32', data: () => quantize('F32', v) });
  const s = d.positions.scaling;
  if (s?.kind === 'linear') md.push([a('rope.scaling.type'), { type: 'string', value: 'linear' }], [a('rope.scaling.factor'), { type: 'f32', value: s.factor }]);
  else if (s?.kind === 'llama3' && g.llamaExtras) extra.push(f32Tensor('rope_freqs.weight', llama3Factors(d)));
  else if (s?.kind === 'longrope' && g.longropeFactors) {
    extra.push(f32Tensor('rope_factors_long.weight', Float32Array.from(s.longFactor)), f32Tensor('rope_factors_short.weight', Float32Array.from(s.shortFactor)));
    md.push([a('rope.scaling.original_context_length'), { type: 'u32', value: s.originalMaxPositions }]);
  } else if (s) throw new ModelFileError(`export-gguf: ${s.kind} rope scaling has no GGUF form llama.cpp reads for ${arch}`);
  const window = d.attention.slidingWindow;
  for (const k of familyKeys(g, d, config)) md.push([a(k.key), { type: k.type, value: k.value }]);
  if (g.slidingWindow) {
    if (window !== undefined) md.push([a('attention.sliding_window'), { type: 'u32', value: window }]);
  } else if (window !== undefined) {
    // llama.cpp's llama and qwen2 graphs have no window: the file then holds a model that differs past it.
    warnings.push(`the sliding window of ${window} tokens is not stored: llama.cpp's ${arch} architecture has none, so prompts longer than that compute differently`);
  }
  md.push(...tokenizerMetadata(o.folder, d));
  const source = openTensorSource(o.folder);
  const tensors: GgufTensorToWrite[] = [];
  const typeOf = (gguf: string, dims: number[]): QuantizeType => {
    const type: QuantizeType = dims.length < 2 ? 'F32' : isMix(o.type) ? kQuantMixType(o.type, gguf, dims, d.layers, !d.embedding.tiedHead, d.moe?.experts ?? 0) : o.type;
    return (type === 'Q8_0' || type === 'Q4_0') && dims[0]! % 32 !== 0 ? 'F16' : type;
  };
  // Mixture-of-experts layers: each projection's experts go into one 3-D tensor (`expertTensorPlaces`).
  const places = d.checkpointNames ? expertTensorPlaces(d, d.checkpointNames.layerPrefix) : new Map<string, ExpertTensorPlace>();
  const merged = new Map<string, { dims: number[]; experts: string[] }>();
  try {
    for (const [name, info] of [...source.tensors].sort(([x], [y]) => (x < y ? -1 : 1))) {
      if (d.embedding.tiedHead && name === 'lm_head.weight') continue;
      if (name.endsWith('.rotary_emb.inv_freq')) continue;
      const place = places.get(name);
      if (place?.expert !== undefined) {
        const group = merged.get(place.gguf) ?? { dims: [...info.shape].reverse().concat(d.moe!.experts), experts: [] };
        group.experts[place.expert] = name;
        merged.set(place.gguf, group);
        continue;
      }
      if (place) {
        const dims = place.vector ? [info.shape.reduce((x, y) => x * y, 1)] : [...info.shape].reverse();
        const type = place.keepF32 ? 'F32' : typeOf(place.gguf, dims);
        tensors.push({ name: place.gguf, dims, type, data: () => quantize(type, source.read(name)) });
        continue;
      }
      const gguf = ggufTensorNameIn(name, g.layerNames ?? {});
      if (!gguf) throw new ModelFileError(`export-gguf: tensor ${name} has no llama.cpp name for ${arch}`);
      const dims = [...info.shape].reverse();
      const type = typeOf(gguf, dims);
      const permute = g.permutedRotary && /\.(q_proj|k_proj)\./.test(name) ? (name.includes('q_proj') ? d.attention.heads : d.attention.kvHeads) : 0;
      const plusOne = g.normPlusOne && /norm\.weight$/.test(name);
      tensors.push({
        name: gguf,
        dims,
        type,
        data: () => {
          let v = source.read(name);
          if (permute) v = permuteRotary(v, permute, dims.length === 2 ? dims[0]! : 1);
          // llama.cpp's Gemma graphs multiply by the stored norm weight: its converter stores 1 + w.
          if (plusOne) v = v.map((x) => x + 1);
          return quantize(type, v);
        },
      });
    }
    for (const [gguf, { dims, experts }] of merged) {
      if (experts.filter(Boolean).length !== d.moe!.experts) throw new ModelFileError(`export-gguf: ${gguf} is missing experts (${experts.filter(Boolean).length} of ${d.moe!.experts} in the folder)`);
      const type = typeOf(gguf, dims);
      // Blocks run along rows and every expert is whole rows: the experts' quantized bytes one after another are the 3-D tensor's.
      tensors.push({ name: gguf, dims, type, data: () => Buffer.concat(experts.map((name) => quantize(type, source.read(name)))) });
    }
    tensors.push(...extra);
    o.log?.(`writing ${o.out}: ${arch}, ${tensors.length} tensors, ${o.type}`);
    writeGguf(o.out, md, tensors);
  } finally {
    source.close();
  }
  for (const w of warnings) o.log?.(`warning: ${w}`);
  return { tensors: tensors.length, warnings };
}

/** The family's own `<arch>.*` keys; a model llama.cpp would compute differently is refused as the family says why. */
function familyKeys(g: FamilyGguf, d: ModelDescription, config: Record<string, unknown>): GgufKeyValue[] {
  try {
    return g.writeKeys?.(d, config) ?? [];
  } catch (e) {
    if (e instanceof ModelFileError) throw new ModelFileError(`export-gguf: ${e.message}`);
    throw e;
  }
}

/** `tokenizer.ggml.*` from a folder's tokenizer.json (BPE: byte-level as gpt2, byte-fallback as llama/SentencePiece). */
function tokenizerMetadata(folder: string, d: ModelDescription): [string, GgufWriteValue][] {
  const path = join(folder, 'tokenizer.json');
  if (!existsSync(path)) throw new ModelFileError(`export-gguf: ${folder} has no tokenizer.json; llama.cpp needs the tokenizer in the file`);
  const tj = JSON.parse(readFileSync(path, 'utf8')) as { model?: Record<string, unknown>; added_tokens?: { id: number; content: string; special?: boolean }[]; pre_tokenizer?: unknown };
  const cfgPath = join(folder, 'tokenizer_config.json');
  const cfg = existsSync(cfgPath) ? (JSON.parse(readFileSync(cfgPath, 'utf8')) as Record<string, unknown>) : {};
  const model = tj.model;
  if (model?.type !== 'BPE' || typeof model.vocab !== 'object' || model.vocab === null) throw new ModelFileError(`export-gguf: ${path} is not a BPE tokenizer; only BPE (byte-level or SentencePiece-style) is written`);
  const tokens: string[] = [];
  for (const [t, id] of Object.entries(model.vocab as Record<string, number>)) tokens[id] = t;
  const added = new Map((tj.added_tokens ?? []).map((t) => [t.id, t]));
  for (const [id, t] of added) tokens[id] = t.content;
  // llama.cpp sizes its token table by the embedding: ids up to the vocabulary are padded with unused tokens.
  const padded = new Set<number>();
  for (let id = 0; id < Math.max(tokens.length, d.vocabSize); id++) {
    if (tokens[id] !== undefined) continue;
    tokens[id] = `[PAD${id}]`;
    padded.add(id);
  }
  const merges = ((model.merges ?? []) as (string | [string, string])[]).map((m) => (Array.isArray(m) ? m : (m.split(' ') as [string, string])));
  const typeOf = (id: number, byte: boolean) => {
    const a = added.get(id);
    if (a) return a.special ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined;
    if (padded.has(id)) return TOKEN_TYPE.unused;
    return byte && /^<0x[0-9A-F]{2}>$/.test(tokens[id]!) ? TOKEN_TYPE.byte : TOKEN_TYPE.normal;
  };
  const special = (key: string) => {
    const v = cfg[key];
    const content = typeof v === 'string' ? v : v && typeof v === 'object' ? (v as { content?: string }).content : undefined;
    const id = content === undefined ? -1 : tokens.indexOf(content);
    return id >= 0 ? id : undefined;
  };
  const md: [string, GgufWriteValue][] = [];
  if (model.byte_fallback === true) {
    // SentencePiece scores from the merge order: the piece made by merge k scores −k (earlier merges win).
    const ids = new Map(tokens.map((t, i) => [t, i]));
    const scores = new Float32Array(tokens.length);
    merges.forEach(([l, r], k) => {
      const id = ids.get(l + r);
      if (id !== undefined && scores[id] === 0) scores[id] = -(k + 1);
    });
    md.push(
      ['tokenizer.ggml.model', { type: 'string', value: GGML_SENTENCEPIECE }],
      ['tokenizer.ggml.tokens', { type: 'strings', value: tokens }],
      ['tokenizer.ggml.scores', { type: 'f32s', value: scores }],
      ['tokenizer.ggml.token_type', { type: 'i32s', value: tokens.map((_, i) => (typeof model.unk_token === 'string' && tokens[i] === model.unk_token ? TOKEN_TYPE.unknown : typeOf(i, true))) }],
    );
    const unk = typeof model.unk_token === 'string' ? tokens.indexOf(model.unk_token) : -1;
    if (unk >= 0) md.push(['tokenizer.ggml.unknown_token_id', { type: 'u32', value: unk }]);
  } else {
    const text = JSON.stringify(tj.pre_tokenizer ?? null);
    const split = [LLAMA3_SPLIT, QWEN2_SPLIT].find((s) => text.includes(JSON.stringify(s).slice(1, -1))) ?? (/"use_regex":true/.test(text) ? null : undefined);
    const pre = split === undefined ? undefined : ggmlPreName(split);
    if (!pre) throw new ModelFileError(`export-gguf: ${path}'s pre-tokenizer is none llama.cpp names (Llama 3, Qwen2 or GPT-2 splitting)`);
    md.push(
      ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
      ['tokenizer.ggml.pre', { type: 'string', value: pre }],
      ['tokenizer.ggml.tokens', { type: 'strings', value: tokens }],
      ['tokenizer.ggml.token_type', { type: 'i32s', value: tokens.map((_, i) => typeOf(i, false)) }],
      ['tokenizer.ggml.merges', { type: 'strings', value: merges.map(([l, r]) => `${l} ${r}`) }],
    );
  }
  const bos = special('bos_token') ?? d.bosTokenId;
  const eos = special('eos_token') ?? d.eosTokenId;
  const pad = special('pad_token') ?? d.padTokenId;
  if (bos !== undefined) md.push(['tokenizer.ggml.bos_token_id', { type: 'u32', value: bos }]);
  if (eos !== undefined) md.push(['tokenizer.ggml.eos_token_id', { type: 'u32', value: eos }]);
  if (pad !== undefined) md.push(['tokenizer.ggml.padding_token_id', { type: 'u32', value: pad }]);
  const addBos = typeof cfg.add_bos_token === 'boolean' ? cfg.add_bos_token : JSON.stringify(tj).includes('"TemplateProcessing"');
  md.push(['tokenizer.ggml.add_bos_token', { type: 'bool', value: addBos }]);
  if (typeof cfg.chat_template === 'string') md.push(['tokenizer.chat_template', { type: 'string', value: cfg.chat_template }]);
  return md;
}
