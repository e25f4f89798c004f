import { checkpointLayerShapes, splitCheckpointLayer, transposeLayerTensors } from './layer-tensors.js';
import type { LayerTensors, ModelDescription } from '@flexhelm/contract';
import { ModelFileError } from './model-file-error.js';
import type { EmbeddingWeights, HeadWeights, OwnEndWeight } from '@flexhelm/contract';
import { elementCount, type TensorSource } from './tensor-source.js';

/**
 * A Llama-family checkpoint (F32/F16/BF16 safetensors, single or sharded) checked against its description when opened:
 * every tensor `checkpointNames` and `layerTensors` name is present with the shape config.json implies, nothing else
 * is left over. Tensors are read lazily, one layer at a time; Linear weights come back transposed to `[in, out]`.
 */
export class LlamaCheckpoint {
  private readonly names: NonNullable<ModelDescription['checkpointNames']>;

  constructor(
    readonly description: ModelDescription,
    private readonly source: TensorSource,
  ) {
    const d = description;
    if (!d.checkpointNames) throw new Error(`${d.name}: a ${d.family} description without checkpointNames cannot be read from a checkpoint`);
    this.names = d.checkpointNames;
    const expected = new Map<string, number[]>();
    expected.set(this.names.embedding, [d.vocabSize, d.embedding.dim]);
    // The description's shapes are `[in, out]`; checkpoints hold Linear weights as `[out, in]` (fused ones whole).
    // A mixture of experts' dense layers (Qwen2-MoE) hold other tensors than its sparse ones.
    for (let i = 0; i < d.layers; i++) for (const [suffix, shape] of checkpointLayerShapes(d, i)) expected.set(this.layerName(i, suffix), shape);
    expected.set(this.names.finalNorm, [d.hiddenSize]);
    if (this.names.head) expected.set(this.names.head, [d.vocabSize, d.hiddenSize]);
    for (const [name, shape] of expected) {
      const info = source.tensors.get(name);
      if (!info) throw new ModelFileError(`the checkpoint has no tensor ${name} (a ${d.family} model with this config.json needs it)`);
      if (info.shape.join(',') !== shape.join(',')) throw new ModelFileError(`${info.file}: tensor ${name} has shape [${info.shape.join(', ')}], config.json implies [${shape.join(', ')}]`);
    }
    for (const [name, info] of source.tensors) {
      // Tied checkpoints may still carry the lm_head alias; old ones carry rotary inv_freq buffers. Both are derived.
      if (expected.has(name) || (d.embedding.tiedHead && name === 'lm_head.weight') || name.endsWith('.rotary_emb.inv_freq')) continue;
      throw new ModelFileError(`${info.file}: tensor ${name} is not part of a ${d.family} model with this config.json (wrong model folder or config?)`);
    }
  }

  private layerName(i: number, suffix: string): string {
    return `${this.names.layerPrefix}${i}.${suffix}`;
  }

  private read(name: string): Float32Array {
    const info = this.source.tensors.get(name)!;
    const data = this.source.read(name);
    if (data.length !== elementCount(info.shape)) throw new ModelFileError(`${info.file}: tensor ${name} holds ${data.length} values, expected ${elementCount(info.shape)}`);
    return data;
  }

  embedding(own?: ReadonlySet<OwnEndWeight>): EmbeddingWeights {
    return { tokens: own?.has('tokens') ? new Float32Array(0) : this.read(this.names.embedding) };
  }

  /** Layer `i`'s tensors by key, Linear weights `[in, out]`; the keys in `skip` are not read. */
  layer(i: number, skip?: ReadonlySet<string>): LayerTensors {
    const d = this.description;
    if (!Number.isInteger(i) || i < 0 || i >= d.layers) throw new Error(`layer ${i} out of range 0..${d.layers - 1}`);
    return transposeLayerTensors(d, splitCheckpointLayer(d, (suffix) => this.read(this.layerName(i, suffix)), i, skip));
  }

  /** The final norm and the output projection; `tokens` (the already read token table) is the tied head. */
  head(tokens?: Float32Array, own?: ReadonlySet<OwnEndWeight>): HeadWeights {
    const finalLnW = this.read(this.names.finalNorm);
    if (own?.has('lmHead')) return { finalLnW, lmHead: new Float32Array(0) };
    return { finalLnW, lmHead: this.names.head ? this.read(this.names.head) : tokens?.length ? tokens : this.read(this.names.embedding) };
  }

  close(): void {
    this.source.close();
  }
}
