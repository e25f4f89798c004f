import type { BackendKvCache, KvPair, OptBackend, StepShape, StreamedLayers, TransposedLayerWeights } from './opt-backend.js';
import type { OptConfig } from './opt-config.js';
import { referenceEmbed, referenceHead, referenceLayer } from './opt-reference.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights } from './opt-weights.js';
import { StagedKvCache } from './staged-kv-cache.js';
import { untransposeLayerWeights } from './streamed-layer.js';

/** The plain-TS forward pass behind the backend interface: slow, exact, the yardstick for the fast backends. */
export class ReferenceBackend implements OptBackend {
  readonly name = 'reference';
  private config!: OptConfig;
  private embedding?: EmbeddingWeights;
  private readonly layers: LayerWeights[] = [];
  private headWeights?: HeadWeights;
  private step?: StepShape;

  async init(config: OptConfig): Promise<void> {
    this.config = config;
  }
  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    this.embedding = weights;
  }
  async loadLayer(index: number, weights: LayerWeights): Promise<void> {
    this.layers[index] = weights;
  }
  async loadHead(weights: HeadWeights): Promise<void> {
    this.headWeights = weights;
  }
  private readonly resident = new Map<number, Partial<TransposedLayerWeights>>();
  readonly streamedLayers: StreamedLayers = {
    loadLayer: async (index, resident) => {
      this.resident.set(index, resident);
      delete this.layers[index];
    },
    setLayer: async (index, weights) => {
      const resident = this.resident.get(index);
      if (!resident) throw new Error(`ReferenceBackend: layer ${index} is not a streamed layer (call streamedLayers.loadLayer first)`);
      this.layers[index] = untransposeLayerWeights(this.config, { ...resident, ...weights } as TransposedLayerWeights);
    },
    reclaim: () => [],
  };
  /** The plain float32 cache, stepped through this backend's `layer`. */
  openKvCache(batch: number): BackendKvCache {
    return new StagedKvCache(this, this.config.numHiddenLayers, this.config.hiddenSize, batch);
  }
  async embed(ids: Int32Array, positions: Int32Array): Promise<Float32Array> {
    if (!this.embedding) throw new Error('ReferenceBackend: loadEmbedding was not called');
    return referenceEmbed(this.config, this.embedding, ids, positions);
  }
  async setStep(step: StepShape): Promise<void> {
    this.step = step;
  }
  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const w = this.layers[index];
    if (!w || !this.step) throw new Error(`ReferenceBackend: layer ${index} not loaded or setStep not called`);
    return referenceLayer(this.config, w, this.step, hidden, past);
  }
  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    if (!this.headWeights) throw new Error('ReferenceBackend: loadHead was not called');
    return referenceHead(this.config, this.headWeights, hidden, rows);
  }
  async dispose(): Promise<void> {
    this.layers.length = 0;
  }
}
