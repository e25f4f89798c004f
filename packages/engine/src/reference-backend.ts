import { untransposeLayerTensors } from './layer-tensors.js';
import { attentionHalf, decoderLayer, llamaEmbed, llamaHead, mlpHalf, stepInvFreq } from './llama-reference.js';
import { chosenExperts, routedMlp, routeLayerTokens, type TokenRoutes } from './moe-reference.js';
import { isOptShaped, isSparseLayer, kvValuesPerToken, requireKinds, type LayerTensors, type ModelDescription, type ModelKind, type BackendKvCache, type DecoderBackend, type ExpertSource, type KvPair, type StepShape, type StreamedLayers } from '@flexhelm/contract';
import { referenceEmbed, referenceHead, referenceLayer } from './families/opt/opt-reference.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights } from '@flexhelm/contract';
import { StagedKvCache } from './staged-kv-cache.js';

/** Every kind the reference computes: OPT's (families/opt/opt-reference.ts) and the rotary families' (llama-reference.ts). */
const REFERENCE_KINDS: readonly ModelKind[] = [
  'norm:layernorm', 'norm:rmsnorm', 'norm:rmsnorm-plus-one',
  'placement:pre', 'placement:post', 'placement:post-branch', 'placement:pre-and-post-branch',
  'positions:learned', 'rope:default', 'rope:linear', 'rope:dynamic', 'rope:llama3', 'rope:longrope',
  'attention:scale', 'attention:logit-softcap', 'attention:window', 'attention:window-even-layers', 'attention:qk-norm',
  'mlp:relu', 'mlp:swiglu', 'mlp:geglu-tanh', 'mlp:moe', 'mlp:moe-shared-expert', 'mlp:moe-dense-layers',
  'embedding:scale', 'head:logit-softcap',
];

/**
 * The plain-TS forward pass behind the backend interface: slow, exact, the yardstick for the fast backends. Computes
 * every family: OPT with families/opt/opt-reference.ts, the rotary families (Llama, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2, and the
 * mixtures of experts Mixtral and Qwen2-MoE through moe-reference.ts) with llama-reference.ts's `decoderLayer`, by kind; `init` refuses a kind neither computes. Layers are kept in the checkpoint's `[out, in]` layout those functions read.
 */
export class ReferenceBackend implements DecoderBackend {
  readonly name = 'reference';
  /**
   * `onRoutes`: called with each sparse layer's routes of a step (`[batch·seq]` tokens in step order, pads included):
   * routing statistics of a mixture of experts.
   */
  constructor(private readonly options: { onRoutes?: (layer: number, routes: TokenRoutes, step: StepShape) => void } = {}) {}
  private model!: ModelDescription;
  /** Whether OPT's kernels (families/opt/opt-reference.ts) compute the model: learned positions, LayerNorm, ReLU MLP. */
  private opt = false;
  private embedding?: EmbeddingWeights;
  private readonly layers: LayerTensors[] = [];
  private headWeights?: HeadWeights;
  private step?: StepShape;
  /** RoPE inverse frequencies of the current step (rotary families). */
  private invFreq?: Float32Array;

  async init(model: ModelDescription): Promise<void> {
    requireKinds(model, 'the reference backend', REFERENCE_KINDS);
    if (!isOptShaped(model) && model.positions.kind !== 'rope') throw new Error(`ReferenceBackend: ${model.family} with ${model.positions.kind} positions is not implemented`);
    this.model = model;
    this.opt = isOptShaped(model);
  }
  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    this.embedding = weights;
  }
  async loadLayer(index: number, weights: LayerTensors): Promise<void> {
    this.layers[index] = untransposeLayerTensors(this.model, weights);
  }
  async loadHead(weights: HeadWeights): Promise<void> {
    this.headWeights = weights;
  }
  private readonly resident = new Map<number, Partial<LayerTensors>>();
  /** Sparse streamed layers whose experts come from a source once routed (`StreamedLayers.routedExperts`). */
  private readonly expertSources = new Map<number, ExpertSource>();
  readonly streamedLayers: StreamedLayers = {
    routedExperts: true,
    // No ownTensors: the resident part is float32 only.
    loadLayer: async (index, resident) => {
      this.resident.set(index, resident as Partial<LayerTensors>);
      delete this.layers[index];
    },
    setLayer: async (index, weights, experts) => {
      const resident = this.resident.get(index);
      if (!resident) throw new Error(`ReferenceBackend: layer ${index} is not a streamed layer (call streamedLayers.loadLayer first)`);
      this.layers[index] = untransposeLayerTensors(this.model, { ...resident, ...weights } as LayerTensors);
      if (experts) this.expertSources.set(index, experts);
      else this.expertSources.delete(index);
    },
    reclaim: () => [],
  };
  /** The plain float32 cache, stepped through this backend's `layer`. */
  openKvCache(batch: number): BackendKvCache {
    return new StagedKvCache(this, this.model.layers, kvValuesPerToken(this.model), batch);
  }
  async embed(ids: Int32Array, positions: Int32Array): Promise<Float32Array> {
    if (!this.embedding) throw new Error('ReferenceBackend: loadEmbedding was not called');
    return this.opt ? referenceEmbed(this.model, this.embedding, ids, positions) : llamaEmbed(this.model, this.embedding.tokens, ids);
  }
  async setStep(step: StepShape): Promise<void> {
    this.step = step;
    // Per step: `dynamic` RoPE scaling depends on the longest sequence the step sees, longrope on the step's key count.
    this.invFreq = this.opt || !step.positions ? undefined : stepInvFreq(this.model, step.positions, step.pastLen + step.seq);
  }
  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const w = this.layers[index];
    if (!w || !this.step) throw new Error(`ReferenceBackend: layer ${index} not loaded or setStep not called`);
    if (this.opt) return referenceLayer(this.model, w as unknown as LayerWeights, this.step, hidden, past);
    if (!this.invFreq) throw new Error(`ReferenceBackend: ${this.model.family} layers need the step's positions (StepShape.positions)`);
    const step = this.step;
    const observe = this.options.onRoutes;
    const experts = this.expertSources.get(index);
    if (experts && isSparseLayer(this.model, index)) return this.routedLayer(index, w, experts, hidden, past);
    return decoderLayer(this.model, index, w, step, this.invFreq, hidden, past, observe && ((routes) => observe(index, routes, step)));
  }

  /** `decoderLayer` of a sparse layer whose experts are read from `source` once its router has chosen them. */
  private async routedLayer(index: number, w: LayerTensors, source: ExpertSource, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const d = this.model;
    const step = this.step!;
    const N = step.batch * step.seq;
    const half = attentionHalf(d, index, w, step, this.invFreq!, hidden, past);
    const routes = routeLayerTokens(d, w, half.x, N);
    this.options.onRoutes?.(index, routes, step);
    const ids = chosenExperts(routes);
    const arriving = source.read(index, ids);
    const experts = new Map<number, Partial<LayerTensors>>();
    // Each expert in the checkpoint's [out, in] layout as it arrives (the rest are still being read meanwhile).
    for (let i = 0; i < ids.length; i++) experts.set(ids[i]!, untransposeLayerTensors(d, (await arriving[i]!) as LayerTensors));
    return { hidden: mlpHalf(d, index, w, half, routedMlp(d, w, half.x, N, routes, (e) => experts.get(e)!)), present: half.present };
  }
  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    if (!this.headWeights) throw new Error('ReferenceBackend: loadHead was not called');
    return this.opt ? referenceHead(this.model, this.headWeights, hidden, rows) : llamaHead(this.model, this.headWeights, hidden, rows);
  }
  async dispose(): Promise<void> {
    this.layers.length = 0;
  }
}
