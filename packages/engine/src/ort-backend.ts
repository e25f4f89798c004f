import type { BackendKvCache, KvPair, OptBackend, StepShape } from './opt-backend.js';
import { headDim, type OptConfig } from './opt-config.js';
import { embeddingGraph, headGraph, layerStageGraphs, STREAMED_HEAD_INPUT, streamedHeadGraph } from './opt-graphs.js';
import type { CachedLayer, SessionRun, WireTensor } from './ort-protocol.js';
import { OrtKvCache } from './ort-kv-cache.js';
import { OrtWorkerClient, transferable } from './ort-worker-client.js';
import type { EmbeddingWeights, HeadWeights, LayerWeights } from './opt-weights.js';
import { layerTensorShapes, STREAMED_INPUT, streamedLayerGraph, type TransposedLayerWeights } from './streamed-layer.js';

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
export class OrtBackend implements OptBackend {
  readonly name = 'onnxruntime-fp32';
  private client?: OrtWorkerClient;
  private config!: OptConfig;
  private step?: StepShape;
  /** Streamed layers: feed name → shared tensor name in the worker (resident `L<i>.` or streamed `S<i>.` tensors). */
  private readonly streamed = new Map<number, Record<string, string>>();
  private streamedSession = false;
  /** Streamed head: feed name → shared tensor name of its resident tensors, and the tensors for the next head call. */
  private streamedHead?: { resident: Record<string, string>; names: Record<string, string> };
  /** Worker tensors of the streamed layer weights set last (`S.` names). */
  private readonly streamedNames = new Set<string>();
  private nextCache = 1;

  constructor(private readonly options: OrtBackendOptions = {}) {}

  private get worker(): OrtWorkerClient {
    if (!this.client) throw new Error('OrtBackend: init() was not called');
    return this.client;
  }

  /** @internal Decoder layers of the loaded config. */
  get layerCount(): number {
    return this.config.numHiddenLayers;
  }
  /** @internal */
  get hiddenSize(): number {
    return this.config.hiddenSize;
  }

  async init(config: OptConfig): Promise<void> {
    this.config = config;
    this.client ??= new OrtWorkerClient(this.options.intraOpNumThreads, this.options.executionProviders);
  }

  private async create(key: string, model: Uint8Array): Promise<void> {
    await this.worker.request({ kind: 'create', key, model }, [model.buffer as ArrayBuffer]);
  }

  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    await this.create('embed', embeddingGraph(this.config, weights));
  }
  async loadLayer(index: number, weights: LayerWeights): Promise<void> {
    // Two sessions around the KV cache (see layerStageGraphs): attention reads the cache in place.
    const { qkv, rest } = layerStageGraphs(this.config, weights);
    await this.create(`layer${index}.qkv`, qkv);
    await this.create(`layer${index}.rest`, rest);
  }
  async loadHead(weights: HeadWeights): Promise<void> {
    this.streamedHead = undefined;
    await this.create('head', headGraph(this.config, weights));
  }

  private async setSharedTensors(prefix: string, tensors: Partial<TransposedLayerWeights>, transfer: boolean): Promise<Record<string, string>> {
    const names: Record<string, string> = {};
    for (const { key, shape } of layerTensorShapes(this.config)) {
      const data = tensors[key];
      if (!data) continue;
      const name = `${prefix}${STREAMED_INPUT[key]}`;
      await this.worker.request({ kind: 'setShared', name, tensor: { type: 'float32', data, dims: shape } }, transfer ? transferable(data) : []);
      names[STREAMED_INPUT[key]] = name;
    }
    return names;
  }

  async loadStreamedLayer(index: number, resident: Partial<TransposedLayerWeights>): Promise<void> {
    if (!this.streamedSession) {
      await this.create('streamed', streamedLayerGraph(this.config));
      this.streamedSession = true;
    }
    await this.worker.request({ kind: 'release', key: `layer${index}.qkv` });
    await this.worker.request({ kind: 'release', key: `layer${index}.rest` });
    this.streamed.set(index, await this.setSharedTensors(`L${index}.`, resident, true));
  }

  async setStreamedWeights(index: number, weights: Partial<TransposedLayerWeights>): Promise<void> {
    const resident = this.streamed.get(index);
    if (!resident) throw new Error(`OrtBackend: layer ${index} is not a streamed layer (call loadStreamedLayer first)`);
    // The same names for every layer: the worker drops the previous layer's streamed tensors as these replace them,
    // and the streamed head's are freed (the next head call sets them again).
    const head = this.streamedHead;
    if (head && Object.keys(head.names).length > Object.keys(head.resident).length) {
      await this.dropShared(Object.values(head.names).filter((n) => n.startsWith('SH.')));
      head.names = { ...head.resident };
    }
    const names = await this.setSharedTensors('S.', weights, true);
    for (const n of Object.values(names)) this.streamedNames.add(n);
    this.streamed.set(index, { ...Object.fromEntries(Object.entries(resident).filter(([, v]) => v.startsWith('L'))), ...names });
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
    const sharedAs = this.streamed.get(index);
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

  /** @internal One step of a worker-held cache (see `OrtKvCache`). */
  async kvStep(cache: number, batch: number, layers: number[], input: { embed: { ids: Int32Array; positions: Int32Array; seq: number } } | { hidden: Float32Array; seq: number }, mask: WireTensor | string): Promise<Float32Array> {
    const c = this.config;
    const transfer: ArrayBuffer[] = typeof mask === 'string' ? [] : transferable(mask.data);
    let embed: SessionRun | undefined;
    let x: WireTensor | undefined;
    if ('embed' in input) {
      const a = int64(input.embed.ids);
      const p = int64(input.embed.positions);
      const dims = [batch, input.embed.seq];
      embed = { key: 'embed', shared: [], feeds: { ids: { type: 'int64', data: a, dims }, positions: { type: 'int64', data: p, dims } } };
      transfer.push(a.buffer as ArrayBuffer, p.buffer as ArrayBuffer);
    } else {
      x = { type: 'float32', data: input.hidden, dims: [batch, input.seq, c.hiddenSize] };
      transfer.push(...transferable(input.hidden));
    }
    const out = await this.worker.request(
      {
        kind: 'kvStep',
        cache,
        batch,
        heads: c.numAttentionHeads,
        headDim: headDim(c),
        ...(embed ? { embed } : {}),
        ...(x ? { x } : {}),
        mask,
        layers: layers.map((index) => ({ index, layer: this.layerRun(index) })),
      },
      transfer,
    );
    return out.y!.data as Float32Array;
  }

  /** @internal Frees a worker-held cache. */
  async kvClose(cache: number): Promise<void> {
    if (this.client) await this.client.request({ kind: 'kvClose', cache });
  }

  /** The session (and streamed weights) that computes layer `index`. */
  private layerRun(index: number): CachedLayer {
    const sharedAs = this.streamed.get(index);
    return sharedAs ? { key: 'streamed', sharedAs } : { key: `layer${index}` };
  }

  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    const streamed = this.streamedHead;
    if (streamed) {
      for (const [key, input] of this.headInputs()) {
        if (!streamed.names[input]) throw new Error(`OrtBackend: the streamed head's ${key} is neither resident nor set (call setStreamedHead before head)`);
      }
    }
    const out = await this.worker.request(
      { kind: 'run', key: 'head', shared: [], ...(streamed ? { sharedAs: streamed.names } : {}), feeds: { x: { type: 'float32', data: hidden, dims: [rows, this.config.hiddenSize] } } },
      transferable(hidden),
    );
    return out.logits!.data as Float32Array;
  }

  /** The head graph's weight inputs (`streamedHeadGraph`): the final LayerNorm only for pre-LN models. */
  private headInputs(): [keyof typeof STREAMED_HEAD_INPUT, string][] {
    return (Object.entries(STREAMED_HEAD_INPUT) as [keyof typeof STREAMED_HEAD_INPUT, string][]).filter(([key]) => key === 'lmHead' || this.config.doLayerNormBefore);
  }

  private async setHeadTensors(prefix: string, tensors: Partial<HeadWeights>): Promise<Record<string, string>> {
    const names: Record<string, string> = {};
    for (const [key, input] of this.headInputs()) {
      const data = tensors[key];
      if (!data) continue;
      const dims = key === 'lmHead' ? [this.config.vocabSize, this.config.hiddenSize] : [this.config.hiddenSize];
      await this.worker.request({ kind: 'setShared', name: `${prefix}${input}`, tensor: { type: 'float32', data, dims } }, transferable(data));
      names[input] = `${prefix}${input}`;
    }
    return names;
  }

  /** Replaces worker tensors `names` with empty ones, so their memory is freed now rather than at their next use. */
  private async dropShared(names: Iterable<string>): Promise<void> {
    for (const name of names) await this.worker.request({ kind: 'setShared', name, tensor: { type: 'float32', data: new Float32Array(0), dims: [0] } });
  }

  /** The head as `streamedHeadGraph`: `resident` tensors stay in the worker, the others come with `setStreamedHead`. */
  async loadStreamedHead(resident: Partial<HeadWeights>): Promise<void> {
    await this.create('head', streamedHeadGraph(this.config));
    const names = await this.setHeadTensors('H.', resident);
    this.streamedHead = { resident: names, names: { ...names } };
  }

  /**
   * The head's streamed tensors for the following head calls. The last streamed layer's tensors are freed first (the
   * head comes after every layer; `setStreamedWeights` does the same for the head's), so the worker holds one
   * streamed unit at a time, not two.
   */
  async setStreamedHead(weights: Partial<HeadWeights>): Promise<void> {
    const head = this.streamedHead;
    if (!head) throw new Error('OrtBackend: the head is not a streamed head (call loadStreamedHead first)');
    await this.dropShared(this.streamedNames);
    this.streamedNames.clear();
    head.names = { ...head.resident, ...(await this.setHeadTensors('SH.', weights)) };
  }

  async dispose(): Promise<void> {
    await this.client?.terminate();
    this.client = undefined;
  }
}
