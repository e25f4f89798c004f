import { closeSync, openSync, readSync } from 'node:fs';
import { layerTensorsOf, ModelFileError, type ModelDescription } from '@flexhelm/engine';
import { GGML_TYPES } from './ggml-types.js';
import { expertTensorPlaces } from './gguf-experts.js';
import { fileFamily, ggufTensorNameIn, unpermuteRotary } from './gguf-model.js';
import { dequantize } from './dequantize.js';
import { readGgufTensorBytes } from './read-gguf-tensor.js';
import { readGguf, type GgufFile, type GgufTensorInfo } from './read-gguf.js';

/** The ggml block types a backend multiplies as stored (the oneDNN backend's QuantLinear). */
export const KEPT_QUANT_TYPES = ['Q8_0', 'Q4_0', 'Q4_K', 'Q5_K', 'Q6_K'] as const;
export type KeptQuantType = (typeof KEPT_QUANT_TYPES)[number];

/** One weight matrix as ggml blocks: `[out, in]` rows of blocks (32 input values a block; 256 for K-quants), as GGUF stores it. */
export interface QuantizedMatrix {
  type: KeptQuantType;
  blocks: Uint8Array;
}

/**
 * A GGUF file's Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K weight matrices as they are stored, for a backend that multiplies
 * blocks (the oneDNN backend's `quantized` option). Other types (F16, Q4_1) are not listed: the backend computes those
 * from their widened values, which the engine reads from the file as for any checkpoint.
 */
export interface QuantizedWeights {
  /** Layer `index`'s matrices stored as kept blocks, by the description's keys (`qW`, `gateW`, …); read on each call. */
  layer(index: number): Partial<Record<string, QuantizedMatrix>>;
  /** The keys `layer(index)` gives, from the header alone. */
  layerKeys(index: number): string[];
  /** The bytes of each matrix `layer(index)` gives, by key, from the header alone (for memory plans). */
  layerBytes(index: number): Record<string, number>;
  /** Bytes of the head's blocks (0 when `headKept` is false) and of the token table as stored (read by `tokenRows`, not held). */
  readonly headBytes: number;
  readonly tokenTableBytes: number;
  /** The LM head's blocks (`output.weight`, or `token_embd.weight` when tied), `[vocab, hidden]`, if a kept type. */
  head(): QuantizedMatrix | undefined;
  /** Whether `head()` gives blocks (from the header alone). */
  readonly headKept: boolean;
  /**
   * The token table (`token_embd.weight`, any type) as the file stores it, never held: `gather(ids, out)` reads row
   * `ids[t]` from the file (the page cache, as llama.cpp's mapping does) and writes it dequantized as ggml does (the
   * values a full read gives) at `out[t·hidden …]`. A gathered row with a NaN / ±Inf is refused naming the row; a
   * file that shrank since, naming the file. `close()` lets the file go.
   */
  tokenRows(): TokenRows;
  /** Matrices of each type in the file's layers and head (for notices). */
  readonly counts: Partial<Record<KeptQuantType, number>>;
}

/** Byte offsets of each kept type's f16 scales in its block (ggml's block structs). */
const SCALE_OFFSETS: Record<KeptQuantType, readonly number[]> = { Q8_0: [0], Q4_0: [0], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208] };

/**
 * Refuses blocks with a NaN / ±Inf f16 scale (a damaged file): multiplied as stored, they are never widened, so no
 * dequantizing read would catch them, and every logit would come out NaN.
 */
function checkScales(path: string, t: GgufTensorInfo & { type: KeptQuantType }, blocks: Uint8Array): void {
  const size = GGML_TYPES[t.type].blockBytes;
  const offsets = SCALE_OFFSETS[t.type];
  for (let at = 0; at < blocks.length; at += size) {
    for (const o of offsets) {
      if (((blocks[at + o + 1]! << 8) & 0x7c00) === 0x7c00) {
        throw new ModelFileError(`${path}: tensor ${t.name} (${t.type}) has a non-finite scale in block ${at / size}; the file is damaged — download or convert it again`);
      }
    }
  }
}

/** Rows of a token table read as stored (see `QuantizedWeights.tokenRows`). */
export interface TokenRows {
  gather(ids: Int32Array, out: Float32Array): void;
  /** Bytes held in memory (a row's scratch; the table stays in the file). */
  readonly bytes: number;
  /** Closes the file; `gather` refuses afterwards. Idempotent. */
  close(): void;
}

function kept(t: GgufTensorInfo): t is GgufTensorInfo & { type: KeptQuantType } {
  return (KEPT_QUANT_TYPES as readonly string[]).includes(t.type);
}

/**
 * The kept-type matrices of the GGUF file at `path` for `description` (the model the import made of the same file):
 * each layer matrix by its key, the rotary permutation llama.cpp applies to llama q/k undone on whole rows of blocks
 * (exact: a block never spans two rows). Fused checkpoint tensors (Phi-3's qkv) are not split: widened as before.
 */
export function ggufQuantizedWeights(path: string, description: ModelDescription): QuantizedWeights {
  const file: GgufFile = readGguf(path);
  const g = fileFamily(file).family.gguf;
  const names = description.checkpointNames;
  if (!names) throw new ModelFileError(`${path}: ${description.name} has no checkpoint names (only rotary families read GGUF files)`);
  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  // A mixture of experts' MLP tensors: an expert's matrix is its slice of the layer's 3-D `ffn_*_exps` tensor (whole
  // rows of blocks: a valid matrix of its own), the shared expert's are plain matrices. Split-expert files (early
  // Mixtral conversions) are not listed: their experts are widened.
  const experts = expertTensorPlaces(description, names.layerPrefix);
  // `bytes`: the matrix's (an expert's slice of its tensor).
  type Matrix = GgufTensorInfo & { type: KeptQuantType; expert?: number; bytes: number };
  const read = (t: GgufTensorInfo & { type: KeptQuantType; expert?: number }, transform?: (b: Uint8Array) => Uint8Array): QuantizedMatrix => {
    const raw = readGgufTensorBytes(file, t, t.expert === undefined ? undefined : { index: t.expert, of: t.dims[2]! });
    checkScales(path, t, raw);
    return { type: t.type, blocks: transform ? transform(raw) : raw };
  };
  const matrixOf = (index: number, key: string, suffix: string, shape: number[]): Matrix | undefined => {
    const name = `${names.layerPrefix}${index}.${suffix}`;
    const place = experts.get(name);
    const t = byName.get(place ? place.gguf : (ggufTensorNameIn(name, g.layerNames ?? {}) ?? ''));
    if (!t || !kept(t)) return undefined;
    const slices = place?.expert !== undefined ? t.dims[2] : undefined;
    if (t.dims[0] !== shape[0] || t.dims[1] !== shape[1] || (place?.expert !== undefined && t.dims.length !== 3)) throw new ModelFileError(`${path}: ${t.name} is ${t.dims.join(' × ')}; ${key} of ${description.name} is ${shape.join(' × ')} ([in, out]${slices === undefined ? '' : ', one slice of the experts'})`);
    return place?.expert === undefined ? { ...t, bytes: t.byteLength } : { ...t, expert: place.expert, bytes: t.byteLength / slices! };
  };
  const counts: Partial<Record<KeptQuantType, number>> = {};
  const count = (t: { type: KeptQuantType }) => (counts[t.type] = (counts[t.type] ?? 0) + 1);
  const matrices = (index: number) =>
    layerTensorsOf(description, index).filter((s) => /W$/.test(s.key) && !/Norm/.test(s.key) && s.shape.length === 2 && !s.checkpointRows);
  for (let i = 0; i < description.layers; i++) for (const s of matrices(i)) {
    const t = matrixOf(i, s.key, s.checkpointSuffix, s.shape);
    if (t) count(t);
  }
  const headTensor = byName.get(names.head ? 'output.weight' : 'token_embd.weight');
  const head = headTensor && kept(headTensor) ? headTensor : undefined;
  if (head) count(head);
  return {
    counts,
    layerKeys: (index) => matrices(index).filter((s) => matrixOf(index, s.key, s.checkpointSuffix, s.shape)).map((s) => s.key),
    layerBytes(index) {
      const out: Record<string, number> = {};
      for (const s of matrices(index)) {
        const t = matrixOf(index, s.key, s.checkpointSuffix, s.shape);
        if (t) out[s.key] = t.bytes;
      }
      return out;
    },
    headBytes: head?.byteLength ?? 0,
    tokenTableBytes: byName.get('token_embd.weight')?.byteLength ?? 0,
    layer(index) {
      const out: Partial<Record<string, QuantizedMatrix>> = {};
      for (const s of matrices(index)) {
        const t = matrixOf(index, s.key, s.checkpointSuffix, s.shape);
        if (!t) continue;
        const q = /\.q_proj\./.test(s.checkpointSuffix), k = /\.k_proj\./.test(s.checkpointSuffix);
        const rowBytes = (t.dims[0]! / GGML_TYPES[t.type].blockValues) * GGML_TYPES[t.type].blockBytes;
        const heads = q ? description.attention.heads : description.attention.kvHeads;
        out[s.key] = read(t, g.permutedRotary && (q || k) ? (b) => unpermuteRotary(b, heads, rowBytes) : undefined);
      }
      return out;
    },
    head: () => (head ? read(head) : undefined),
    headKept: head !== undefined,
    tokenRows: () => tokenRowsOf(file, byName.get('token_embd.weight'), description),
  };
}

function tokenRowsOf(file: GgufFile, t: GgufTensorInfo | undefined, d: ModelDescription): TokenRows {
  const dim = d.embedding.dim;
  if (!t || t.dims[0] !== dim || t.dims[1] !== d.vocabSize) {
    throw new ModelFileError(`${file.path}: token_embd.weight is ${t ? t.dims.join(' × ') : 'missing'}; ${d.name}'s token table is ${dim} × ${d.vocabSize}`);
  }
  const type = GGML_TYPES[t.type];
  const rowBytes = (dim / type.blockValues) * type.blockBytes;
  // Each row is read when a token needs it: the table (0.15 GB for Llama-3.2-1B in Q4_0, 0.5 GB for Gemma 2's in Q6_K)
  // is never held a second time beside the head's blocks, and for an untied model never held at all.
  let fd: number | undefined = openSync(file.path, 'r');
  const block = Buffer.alloc(rowBytes);
  const readRow = (id: number): Uint8Array => {
    if (fd === undefined) throw new Error(`${file.path}: the token table was closed (the backend was disposed)`);
    const start = t.position + id * rowBytes;
    for (let got = 0; got < rowBytes; ) {
      const n = readSync(fd, block, got, rowBytes - got, start + got);
      if (n === 0) throw new ModelFileError(`${file.path}: token_embd.weight row ${id} lies past the file's end (the file shrank since it was opened?)`);
      got += n;
    }
    return block;
  };
  return {
    bytes: rowBytes,
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
    gather(ids, out) {
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i]!;
        if (!(id >= 0 && id < d.vocabSize)) throw new RangeError(`token id ${id} is outside ${d.name}'s vocabulary of ${d.vocabSize}`);
        const row = dequantize(t.type, readRow(id), dim, out.subarray(i * dim, (i + 1) * dim));
        for (let j = 0; j < dim; j++) {
          if (!Number.isFinite(row[j]!)) throw new ModelFileError(`${file.path}: tensor token_embd.weight (${t.type}) has a non-finite value (${row[j]}) in row ${id}; the file is damaged — download or convert it again`);
        }
      }
    },
  };
}
