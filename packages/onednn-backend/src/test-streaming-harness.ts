import { kvValuesPerToken, layerTensorsOf, StagedKvCache, type BackendKvCache, type DecoderBackend, type EmbeddingWeights, type HeadWeights, type KvPair, type LayerTensors, type ModelDescription, type StepShape } from '@flexhelm/engine';
import type { OneDnnBackend } from './onednn-backend.js';

/**
 * What the offloader does with a streamed layer, without its tiers: the tensors of `residentGroups` stay in the
 * backend (`streamedLayers.loadLayer`), the rest is handed over (`setLayer`) before every use of the layer.
 */
export class StreamingHarness implements DecoderBackend {
  readonly name = 'streaming-harness';
  private description!: ModelDescription;
  private readonly streamed: Partial<LayerTensors>[] = [];

  constructor(
    private readonly inner: OneDnnBackend,
    private readonly residentGroups: readonly string[],
  ) {}

  async init(model: ModelDescription): Promise<void> {
    this.description = model;
    await this.inner.init(model);
  }
  loadEmbedding(w: EmbeddingWeights): Promise<void> {
    return this.inner.loadEmbedding(w);
  }
  loadHead(w: HeadWeights): Promise<void> {
    return this.inner.loadHead(w);
  }
  async loadLayer(index: number, w: LayerTensors): Promise<void> {
    const resident: Partial<LayerTensors> = {};
    const rest: Partial<LayerTensors> = {};
    for (const t of layerTensorsOf(this.description, index)) (this.residentGroups.includes(t.group) ? resident : rest)[t.key] = w[t.key];
    this.streamed[index] = rest;
    await this.inner.streamedLayers.loadLayer(index, resident);
  }
  openKvCache(batch: number): BackendKvCache {
    return new StagedKvCache(this, this.description.layers, kvValuesPerToken(this.description), batch);
  }
  embed(ids: Int32Array, positions: Int32Array): Promise<Float32Array> {
    return this.inner.embed(ids, positions);
  }
  setStep(step: StepShape): Promise<void> {
    return this.inner.setStep(step);
  }
  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    await this.inner.streamedLayers.setLayer(index, this.streamed[index]!);
    return this.inner.layer(index, hidden, past);
  }
  head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    return this.inner.head(hidden, rows);
  }
  dispose(): Promise<void> {
    return this.inner.dispose();
  }
}
