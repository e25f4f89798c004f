import { optConfigOfDescription, positionTable, type BufferPool, type EmbeddingWeights, type HeadWeights, type KvPair, type ModelDescription, type OptConfig, type StepShape } from '@flexhelm/engine';
import type { DecoderKind, Fp32Linear, PackedLayer } from './decoder-kind.js';
import { LAYER_PART_TENSORS, type KvBuffer, type LayerPart, type LinearOptions, type NativeBinding, type NativeLayer, type NativeLinear } from './native-addon.js';

/**
 * OPT on the oneDNN backend: its own native layer (LayerNorms, fused QKV, attention, o_proj + residual, fc1+ReLU,
 * fc2 + residual), the learned position table added at embedding, project_in/out for the models that have them, and
 * the final LayerNorm.
 */
export class OptDecoder implements DecoderKind {
  readonly partTable = LAYER_PART_TENSORS;
  private readonly config: OptConfig;
  private embedding?: EmbeddingWeights;
  private projectIn?: NativeLinear;
  private projectOut?: NativeLinear;
  private finalLn?: { w: Float32Array; b: Float32Array };

  constructor(
    private readonly description: ModelDescription,
    private readonly native: NativeBinding,
  ) {
    this.config = optConfigOfDescription(description, 'the oneDNN backend');
  }

  get layerWeightBytes(): number {
    const H = this.description.hiddenSize;
    return 4 * (4 * H ** 2 + 2 * H * this.description.mlp.intermediateSize);
  }

  private get shape() {
    const c = this.config;
    return { hidden: c.hiddenSize, heads: c.numAttentionHeads, ffn: c.ffnDim, preLayerNorm: c.doLayerNormBefore, eps: c.layerNormEps };
  }

  createLayer(_index: number, weights: Record<string, Float32Array | Uint16Array | undefined>, options: LinearOptions & { parts?: string[] }, base?: PackedLayer): Promise<PackedLayer> {
    return this.native.createLayer(this.shape, weights as Record<string, Float32Array | Uint16Array>, options as LinearOptions & { parts?: LayerPart[] }, base as NativeLayer | undefined);
  }

  async loadEmbedding(weights: EmbeddingWeights, linear: Fp32Linear): Promise<void> {
    this.embedding = weights;
    const c = this.config;
    if (weights.projectIn) this.projectIn = await linear(weights.projectIn, c.wordEmbedProjDim, c.hiddenSize);
  }

  async loadHead(weights: HeadWeights, linear: Fp32Linear): Promise<void> {
    if (weights.finalLnW && weights.finalLnB) this.finalLn = { w: weights.finalLnW, b: weights.finalLnB };
    if (weights.projectOut) this.projectOut = await linear(weights.projectOut, this.description.hiddenSize, this.description.embedding.dim);
  }

  /** Token rows (through project_in), plus the learned position rows. */
  async embed(ids: Int32Array, positions: Int32Array, pool: BufferPool): Promise<Float32Array> {
    const e = this.embedding;
    if (!e) throw new Error('OneDnnBackend: loadEmbedding was not called');
    const n = ids.length;
    const W = this.config.wordEmbedProjDim;
    const E = this.config.hiddenSize;
    let tok = pool.take(n * W);
    for (let t = 0; t < n; t++) tok.set(e.tokens.subarray(ids[t]! * W, (ids[t]! + 1) * W), t * W);
    if (this.projectIn) {
      const projected = pool.take(n * E);
      await this.projectIn.run(tok, n, projected);
      pool.give(tok);
      tok = projected;
    }
    const table = positionTable(e);
    for (let t = 0; t < n; t++) {
      const p = positions[t]! * E;
      const o = t * E;
      for (let i = 0; i < E; i++) tok[o + i]! += table[p + i]!;
    }
    return tok;
  }

  run(layer: PackedLayer, _index: number, s: StepShape, hidden: Float32Array, past: KvPair, y: Float32Array, k: Float32Array, v: Float32Array): Promise<void> {
    return (layer as NativeLayer).run(hidden, past.k, past.v, s.maskBias, s.batch, s.seq, s.pastLen, y, k, v);
  }

  runCached(layer: PackedLayer, _index: number, s: StepShape, hidden: Float32Array, y: Float32Array, k: KvBuffer, v: KvBuffer, capacity: number): Promise<void> {
    return (layer as NativeLayer).runCached(hidden, s.maskBias, s.batch, s.seq, s.pastLen, y, k, v, capacity);
  }

  async headInput(hidden: Float32Array, rows: number): Promise<Float32Array> {
    const d = this.description;
    let h = hidden;
    if (this.finalLn) {
      const y = this.native.allocFloat32(rows * d.hiddenSize);
      await this.native.layerNorm(h, rows, d.hiddenSize, this.finalLn.w, this.finalLn.b, d.norm.eps, y);
      h = y;
    }
    if (this.projectOut) {
      const y = this.native.allocFloat32(rows * d.embedding.dim);
      await this.projectOut.run(h, rows, y);
      h = y;
    }
    return h;
  }

  capLogits(): void {}

  dispose(): void {
    this.embedding = undefined;
    this.projectIn = this.projectOut = undefined;
  }
}
