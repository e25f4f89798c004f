import { optConfigOfDescription, type LayerTensors, type ModelDescription } from './model-description.js';
import type { BackendKvCache, KvPair, OptBackend, StepShape, StreamedHead, StreamedLayers, TransposedLayerWeights } from './opt-backend.js';
import { headDim, type OptConfig } from './opt-config.js';
import { embeddingGraph, headGraph, layerStageGraphs } from './opt-graphs.js';
import type { CachedLayer, SessionRun, WireTensor } from './ort-protocol.js';
import { OrtKvCache, type WorkerKvHost } from './ort-kv-cache.js';
import { OrtWorkerClient, transferable } from './ort-worker-client.js';
import type { EmbeddingWeights, HeadWeights } from './opt-weights.js';
import { untransposeLayerWeights } from './streamed-layer.js';
import { OrtStreamedWeights, type OrtSessionHost } from './ort-streamed-weights.js';

export interface OrtBackendOptions {
  /** onnxruntime intra-op threads (default: onnxruntime's choice, all cores). */
  intraOpNumThreads?: number;
  /**
   * onnxruntime execution providers in order of preference (default: the CPU provider only). `['cuda', 'cpu']` makes
   * the compute tier an NVIDIA GPU where onnxruntime-node's CUDA provider is installed — its install script fetches it
   * from NuGet, which `pnpm-workspace.yaml` disables here (`allowBuilds: { onnxruntime-node: false }`): set it to true
   * on such a machine. Untested on this project's machines (no GPU); nodes the provider lacks fall back to the CPU.
   */
  executionProviders?: string[];
}

function int64(a: Int32Array): BigInt64Array {
  const out = new BigInt64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = BigInt(a[i]!);
  return out;
}

/**
 * fp32 compute on onnxruntime-node's CPU provider, in a worker thread: one session per stage (embedding, each layer,
 * head) built from our own ONNX graphs with the weights as initializers (so onnxruntime prepacks them once).
 */
export class OrtBackend implements OptBackend, WorkerKvHost, OrtSessionHost {
  readonly name = 'onnxruntime-fp32';
  private client?: OrtWorkerClient;
  private cfg?: OptConfig;
  private step?: StepShape;
  private nextCache = 1;
  private readonly streamed = new OrtStreamedWeights(this);
  readonly streamedLayers: StreamedLayers = this.streamed;
  readonly streamedHead: StreamedHead = this.streamed.head;

  constructor(private readonly options: OrtBackendOptions = {}) {}

  /** @internal */
  get worker(): OrtWorkerClient {
    if (!this.client) throw new Error('OrtBackend: init() was not called');
    return this.client;
  }

  /** @internal */
  get config(): OptConfig {
    if (!this.cfg) throw new Error('OrtBackend: init() was not called');
    return this.cfg;
  }

  /** @internal Decoder layers of the loaded config. */
  get layerCount(): number {
    return this.config.numHiddenLayers;
  }
  /** @internal */
  get hiddenSize(): number {
    return this.config.hiddenSize;
  }

  /** OPT only (its graphs read an OptConfig); another family is refused here, before a worker starts. */
  async init(model: ModelDescription): Promise<void> {
    this.cfg = optConfigOfDescription(model, 'the onnxruntime backend');
    this.client ??= new OrtWorkerClient(this.options.intraOpNumThreads, this.options.executionProviders);
  }

  /** @internal */
  async create(key: string, model: Uint8Array): Promise<void> {
    await this.worker.request({ kind: 'create', key, model }, [model.buffer as ArrayBuffer]);
  }

  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    await this.create('embed', embeddingGraph(this.config, weights));
  }
  async loadLayer(index: number, weights: LayerTensors): Promise<void> {
    // Two sessions around the KV cache (see layerStageGraphs): attention reads the cache in place. The graph builder
    // takes the checkpoint's `[out, in]` layout.
    const { qkv, rest } = layerStageGraphs(this.config, untransposeLayerWeights(this.config, weights as unknown as TransposedLayerWeights));
    await this.create(`layer${index}.qkv`, qkv);
    await this.create(`layer${index}.rest`, rest);
  }
  async loadHead(weights: HeadWeights): Promise<void> {
    this.streamed.residentHead();
    await this.create('head', headGraph(this.config, weights));
  }

  async embed(ids: Int32Array, positions: Int32Array, batch: number, seq: number): Promise<Float32Array> {
    const a = int64(ids);
    const p = int64(positions);
    const out = await this.worker.request(
      { kind: 'run', key: 'embed', shared: [], feeds: { ids: { type: 'int64', data: a, dims: [batch, seq] }, positions: { type: 'int64', data: p, dims: [batch, seq] } } },
      [a.buffer as ArrayBuffer, p.buffer as ArrayBuffer],
    );
    return out.hidden!.data as Float32Array;
  }

  async setStep(step: StepShape): Promise<void> {
    this.step = step;
    const T = step.pastLen + step.seq;
    // Sent once per step (a copy, the caller keeps its array); every layer call reuses it.
    await this.worker.request({ kind: 'setShared', name: 'mask', tensor: { type: 'float32', data: step.maskBias, dims: [step.batch, 1, step.seq, T] } });
  }

  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const step = this.step;
    if (!step) throw new Error('OrtBackend: setStep must be called before layer()');
    const c = this.config;
    const H = c.numAttentionHeads;
    const D = headDim(c);
    const pastDims = [step.batch, H, step.pastLen, D];
    const sharedAs = this.streamed.sharedAs(index);
    const x: WireTensor = { type: 'float32', data: hidden, dims: [step.batch, step.seq, c.hiddenSize] };
    const out = sharedAs
      ? await this.streamedLayer(sharedAs, x, past, pastDims)
      : await this.worker.request(
          { kind: 'pastLayer', key: `layer${index}`, heads: H, headDim: D, pastLen: step.pastLen, x, pastK: past.k, pastV: past.v, mask: 'mask' },
          transferable(hidden, past.k, past.v),
        );
    return { hidden: out.y!.data as Float32Array, present: { k: out.present_k!.data as Float32Array, v: out.present_v!.data as Float32Array } };
  }

  private streamedLayer(sharedAs: Record<string, string>, x: WireTensor, past: KvPair, pastDims: number[]) {
    return this.worker.request(
      {
        kind: 'run',
        key: 'streamed',
        shared: ['mask'],
        sharedAs,
        fetch: ['y', 'present_k', 'present_v'],
        feeds: {
          x,
          past_k: { type: 'float32', data: past.k, dims: pastDims },
          past_v: { type: 'float32', data: past.v, dims: pastDims },
        },
      },
      transferable(x.data as Float32Array, past.k, past.v),
    );
  }

  /**
   * A KV cache kept in the worker beside the sessions: each step is one round trip (embedding and every layer), and
   * only the step's new keys and values are appended there — the cache never travels between threads.
   */
  openKvCache(batch: number): BackendKvCache {
    return new OrtKvCache(this, this.nextCache++, batch);
  }

  /** @internal One step of a worker-held cache (see `OrtKvCache`): embedding and every layer in one round trip. */
  async kvStep(cache: number, batch: number, input: { ids: Int32Array; positions: Int32Array; seq: number }, mask: WireTensor): Promise<Float32Array> {
    const c = this.config;
    const a = int64(input.ids);
    const p = int64(input.positions);
    const dims = [batch, input.seq];
    const embed: SessionRun = { key: 'embed', shared: [], feeds: { ids: { type: 'int64', data: a, dims }, positions: { type: 'int64', data: p, dims } } };
    const out = await this.worker.request(
      {
        kind: 'kvStep',
        cache,
        batch,
        heads: c.numAttentionHeads,
        headDim: headDim(c),
        embed,
        mask,
        layers: Array.from({ length: c.numHiddenLayers }, (_, index) => ({ index, layer: this.layerRun(index) })),
      },
      [...transferable(mask.data), a.buffer as ArrayBuffer, p.buffer as ArrayBuffer],
    );
    return out.y!.data as Float32Array;
  }

  /** @internal Frees a worker-held cache. */
  async kvClose(cache: number): Promise<void> {
    if (this.client) await this.client.request({ kind: 'kvClose', cache });
  }

  /** @internal Copies worker-held cache `cache` (one row) to `rows` rows (see `OrtKvCache.expandRows`). */
  async kvExpand(cache: number, rows: number): Promise<void> {
    await this.worker.request({ kind: 'kvExpand', cache, rows });
  }

  /** The session (and streamed weights) that computes layer `index`. */
  private layerRun(index: number): CachedLayer {
    const sharedAs = this.streamed.sharedAs(index);
    return sharedAs ? { key: 'streamed', sharedAs } : { key: `layer${index}` };
  }

  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    const streamed = this.streamed.headFeeds();
    const out = await this.worker.request(
      { kind: 'run', key: 'head', shared: [], ...(streamed ? { sharedAs: streamed } : {}), feeds: { x: { type: 'float32', data: hidden, dims: [rows, this.config.hiddenSize] } } },
      transferable(hidden),
    );
    return out.logits!.data as Float32Array;
  }

  async dispose(): Promise<void> {
    await this.client?.terminate();
    this.client = undefined;
  }
}
