import { checkOptConfig, OPT_POSITION_OFFSET, type OptConfig } from './opt-config.js';
import { optConfigOfDescription, optDescription } from './opt-description.js';
import { transposed } from '../../transposed.js';
import { ModelFileError } from '../../model-file-error.js';
import { elementCount, type TensorInfo, type TensorSource } from '../../tensor-source.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights, ModelDescription } from '@flexhelm/contract';

export type { EmbeddingWeights, HeadWeights, LayerWeights } from '@flexhelm/contract';

/** OPT's learned position table (every OPT embedding has one; other families' have none). */
export function positionTable(w: EmbeddingWeights): Float32Array {
  if (!w.positions) throw new Error('this embedding has no learned position table (an OPT model needs decoder.embed_positions.weight)');
  return w.positions;
}

const LAYER_PARTS: [keyof LayerWeights, string, (c: OptConfig) => number[]][] = [
  ['qW', 'self_attn.q_proj.weight', (c) => [c.hiddenSize, c.hiddenSize]],
  ['qB', 'self_attn.q_proj.bias', (c) => [c.hiddenSize]],
  ['kW', 'self_attn.k_proj.weight', (c) => [c.hiddenSize, c.hiddenSize]],
  ['kB', 'self_attn.k_proj.bias', (c) => [c.hiddenSize]],
  ['vW', 'self_attn.v_proj.weight', (c) => [c.hiddenSize, c.hiddenSize]],
  ['vB', 'self_attn.v_proj.bias', (c) => [c.hiddenSize]],
  ['oW', 'self_attn.out_proj.weight', (c) => [c.hiddenSize, c.hiddenSize]],
  ['oB', 'self_attn.out_proj.bias', (c) => [c.hiddenSize]],
  ['ln1W', 'self_attn_layer_norm.weight', (c) => [c.hiddenSize]],
  ['ln1B', 'self_attn_layer_norm.bias', (c) => [c.hiddenSize]],
  ['fc1W', 'fc1.weight', (c) => [c.ffnDim, c.hiddenSize]],
  ['fc1B', 'fc1.bias', (c) => [c.ffnDim]],
  ['fc2W', 'fc2.weight', (c) => [c.hiddenSize, c.ffnDim]],
  ['fc2B', 'fc2.bias', (c) => [c.hiddenSize]],
  ['ln2W', 'final_layer_norm.weight', (c) => [c.hiddenSize]],
  ['ln2B', 'final_layer_norm.bias', (c) => [c.hiddenSize]],
];

/** Every tensor the checkpoint of an OPT description must hold, by canonical name (no `model.` prefix), with its shape. */
export function expectedOptTensors(d: ModelDescription): Map<string, number[]> {
  return optTensorShapes(optConfigOfDescription(d, 'an OPT checkpoint'));
}

/** `expectedOptTensors` in the terms OPT's reader and maker hold. */
export function optTensorShapes(c: OptConfig): Map<string, number[]> {
  const m = new Map<string, number[]>();
  m.set('decoder.embed_tokens.weight', [c.vocabSize, c.wordEmbedProjDim]);
  m.set('decoder.embed_positions.weight', [c.maxPositionEmbeddings + OPT_POSITION_OFFSET, c.hiddenSize]);
  if (c.wordEmbedProjDim !== c.hiddenSize) {
    m.set('decoder.project_in.weight', [c.hiddenSize, c.wordEmbedProjDim]);
    m.set('decoder.project_out.weight', [c.wordEmbedProjDim, c.hiddenSize]);
  }
  for (let i = 0; i < c.numHiddenLayers; i++) {
    for (const [, suffix, shape] of LAYER_PARTS) m.set(`decoder.layers.${i}.${suffix}`, shape(c));
  }
  if (c.doLayerNormBefore) {
    m.set('decoder.final_layer_norm.weight', [c.hiddenSize]);
    m.set('decoder.final_layer_norm.bias', [c.hiddenSize]);
  }
  return m;
}

/** Maps a file's tensor name to the canonical one: drops `model.`, and FlexLLMGen's `decoder.layer_norm` rename. */
export function canonicalTensorName(name: string): string {
  let n = name.startsWith('model.') ? name.slice(6) : name;
  if (n.startsWith('decoder.layer_norm.')) n = `decoder.final_layer_norm.${n.slice('decoder.layer_norm.'.length)}`;
  return n;
}

/** Options of `OptWeights` (none yet: the sources check every value for NaN/Inf while they decode it). */
export type OpenOptions = Record<never, never>;

/**
 * An OPT checkpoint checked against its description: every expected tensor present with the right shape, nothing
 * unknown left over. Parameters are read lazily, one layer at a time.
 */
export class OptWeights {
  private readonly byCanonical = new Map<string, TensorInfo>();
  private readonly lmHeadName: string | undefined;
  private readonly config: OptConfig;
  /** The model read, as OPT's reader describes it (token ids OPT's defaults where the description had none). */
  readonly description: ModelDescription;

  constructor(
    model: ModelDescription,
    private readonly source: TensorSource,
    _options: OpenOptions = {},
  ) {
    const config = optConfigOfDescription(model, 'OptWeights');
    // A description built in code (not read from a config.json) is checked too, before anything is sized from it.
    checkOptConfig(config, `config of ${config.name}`);
    this.config = config;
    this.description = optDescription(config);
    const expected = optTensorShapes(config);
    let lmHead: TensorInfo | undefined;
    const unused: string[] = [];
    for (const info of source.tensors.values()) {
      const canon = canonicalTensorName(info.name);
      if (canon === 'lm_head.weight') {
        lmHead = info;
        continue;
      }
      if (!expected.has(canon)) {
        unused.push(`${info.name} (${info.file})`);
        continue;
      }
      const dup = this.byCanonical.get(canon);
      if (dup) throw new ModelFileError(`tensor ${canon} appears twice: as ${dup.name} in ${dup.file} and as ${info.name} in ${info.file}`);
      this.byCanonical.set(canon, info);
    }
    if (unused.length) {
      throw new ModelFileError(`checkpoint has ${unused.length} tensor(s) an OPT model with this config does not use: ${unused.slice(0, 5).join(', ')}${unused.length > 5 ? ', …' : ''} (check config.json matches the weights)`);
    }
    const missing = [...expected.keys()].filter((n) => !this.byCanonical.has(n));
    if (missing.length) {
      throw new ModelFileError(`checkpoint lacks ${missing.length} tensor(s) this config needs: ${missing.slice(0, 5).map((n) => `${n} ${JSON.stringify(expected.get(n))}`).join(', ')}${missing.length > 5 ? ', …' : ''} (wrong config, or an incomplete download)`);
    }
    for (const [name, shape] of expected) {
      const info = this.byCanonical.get(name)!;
      if (info.shape.join(',') !== shape.join(',')) {
        throw new ModelFileError(`${info.file}: tensor ${info.name} has shape ${JSON.stringify(info.shape)}, but the config needs ${JSON.stringify(shape)}`);
      }
    }
    if (lmHead) {
      const want = [config.vocabSize, config.wordEmbedProjDim];
      if (lmHead.shape.join(',') !== want.join(',')) {
        throw new ModelFileError(`${lmHead.file}: tensor ${lmHead.name} has shape ${JSON.stringify(lmHead.shape)}, but the output projection must be ${JSON.stringify(want)}`);
      }
      this.lmHeadName = lmHead.name;
    }
  }

  private read(canonical: string): Float32Array {
    const info = this.byCanonical.get(canonical)!;
    return this.readInfo(info);
  }

  private readInfo(info: TensorInfo): Float32Array {
    const data = this.source.read(info.name);
    if (data.length !== elementCount(info.shape)) throw new Error(`${info.file}: tensor ${info.name} read ${data.length} values, expected ${elementCount(info.shape)}`);
    return data;
  }

  embedding(): EmbeddingWeights {
    const e: EmbeddingWeights = { tokens: this.read('decoder.embed_tokens.weight'), positions: this.read('decoder.embed_positions.weight') };
    if (this.byCanonical.has('decoder.project_in.weight')) e.projectIn = this.read('decoder.project_in.weight');
    return e;
  }

  layer(i: number): LayerWeights {
    if (!Number.isInteger(i) || i < 0 || i >= this.config.numHiddenLayers) throw new Error(`layer ${i} out of range 0..${this.config.numHiddenLayers - 1}`);
    const w = {} as LayerWeights;
    for (const [key, suffix] of LAYER_PARTS) w[key] = this.read(`decoder.layers.${i}.${suffix}`);
    return w;
  }

  /**
   * Layer `i` in the backends' layout: Linear weights `[in, out]` (`transposeLayerTensors`'s result), each decoded
   * and transposed in one pass where the source can (`TensorSource.readTransposed`).
   */
  layerInOut(i: number): LayerWeights {
    if (!Number.isInteger(i) || i < 0 || i >= this.config.numHiddenLayers) throw new Error(`layer ${i} out of range 0..${this.config.numHiddenLayers - 1}`);
    const w = {} as LayerWeights;
    for (const [key, suffix] of LAYER_PARTS) {
      const info = this.byCanonical.get(`decoder.layers.${i}.${suffix}`)!;
      w[key] = info.shape.length === 2 ? this.readInfoTransposed(info) : this.readInfo(info);
    }
    return w;
  }

  private readInfoTransposed(info: TensorInfo): Float32Array {
    if (!this.source.readTransposed) return transposed(this.readInfo(info), info.shape[0]!, info.shape[1]!);
    const data = this.source.readTransposed(info.name);
    if (data.length !== elementCount(info.shape)) throw new Error(`${info.file}: tensor ${info.name} read ${data.length} values, expected ${elementCount(info.shape)}`);
    return data;
  }

  /** Output side; `tokens` may be passed to reuse an already read (tied) embedding. */
  head(tokens?: Float32Array): HeadWeights {
    const h: HeadWeights = {
      lmHead: this.lmHeadName ? this.readInfo(this.source.tensors.get(this.lmHeadName)!) : (tokens ?? this.read('decoder.embed_tokens.weight')),
    };
    if (this.config.doLayerNormBefore) {
      h.finalLnW = this.read('decoder.final_layer_norm.weight');
      h.finalLnB = this.read('decoder.final_layer_norm.bias');
    }
    if (this.byCanonical.has('decoder.project_out.weight')) h.projectOut = this.read('decoder.project_out.weight');
    return h;
  }

  /** True when the checkpoint stores its own lm_head.weight (else the output projection is embed_tokens). */
  get hasSeparateLmHead(): boolean {
    return this.lmHeadName !== undefined;
  }

  close(): void {
    this.source.close();
  }
}
