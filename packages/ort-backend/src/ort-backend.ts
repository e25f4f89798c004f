import { kvValuesPerToken, type LayerTensors, type ModelDescription, type BackendKvCache, type KvPair, type DecoderBackend, type StepShape, type StreamedHead, type StreamedLayers, PhaseTotals } from '@flexhelm/contract';
import type { EmbeddingWeights, HeadWeights } from '@flexhelm/engine';
import { ortGraphs, TOKEN_TABLE, type OrtGraphs } from './ort-family-graphs.js';
import type { CachedLayer, RopeTables, SessionRun, WireTensor } from './ort-protocol.js';
import { OrtKvCache, type WorkerKvHost } from './ort-kv-cache.js';
import { OrtWorkerClient, transferable } from './ort-worker-client.js';
import { OrtStreamedWeights, type OrtSessionHost } from './ort-streamed-weights.js';
import { windowMask } from './window-mask.js';

/** Worker name of the step's windowed mask (`OrtGraphs.window`: the layers with Gemma 2's sliding window read it). */
const WINDOW_MASK = 'mask_window';

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
  /** @internal Tables over this many fp32 bytes are worker tensors, not initializers (default `MAX_TABLE_INITIALIZER_BYTES`; tests lower it). */
  maxTableInitializerBytes?: number;
}

function int64(a: Int32Array): BigInt64Array {
  const out = new BigInt64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = BigInt(a[i]!);
  return out;
}

/**
 * fp32 compute on onnxruntime-node's CPU provider, in a worker thread: one session per stage (embedding, each layer,
 * head) built from our own ONNX graphs with the weights as initializers (so onnxruntime prepacks them once). Computes
 * OPT and the rotary families (Llama, Mistral, Qwen2, Gemma 2, Phi-3, OLMo 2) with one layer builder
 * (llama-graphs.ts over ort-decoder-layer.ts, pieces chosen by kind); the worker's KV cache holds the key/value heads.
 */
export class OrtBackend implements DecoderBackend, WorkerKvHost, OrtSessionHost {
  readonly name = 'onnxruntime-fp32';
  private client?: OrtWorkerClient;
  private description?: ModelDescription;
  private familyGraphs?: OrtGraphs;
  private step?: StepShape;
  /** The resident head's feeds when it reads the shared token table (`OrtGraphs.sharedTable`). */
  private tableHeadFeeds?: Record<string, string>;
  /** The shared token table is in the worker (set by loadEmbedding, or by loadHead when the embedding lives elsewhere). */
  private tableSet = false;
  private nextCache = 1;
  private readonly streamed = new OrtStreamedWeights(this);
  readonly streamedLayers: StreamedLayers = this.streamed;
  readonly loadTimings = new PhaseTotals();
  readonly streamedHead: StreamedHead = this.streamed.head;

  constructor(private readonly options: OrtBackendOptions = {}) {}

  /** @internal */
  get worker(): OrtWorkerClient {
    if (!this.client) throw new Error('OrtBackend: init() was not called');
    return this.client;
  }

  /** @internal */
  get model(): ModelDescription {
    if (!this.description) throw new Error('OrtBackend: init() was not called');
    return this.description;
  }

  /** @internal The graphs of the model's family. */
  get graphs(): OrtGraphs {
    if (!this.familyGraphs) throw new Error('OrtBackend: init() was not called');
    return this.familyGraphs;
  }

  /** @internal Decoder layers of the loaded model. */
  get layerCount(): number {
    return this.model.layers;
  }
  /** @internal Float32 K and V values one row adds per token and layer (the cache holds the key/value heads). */
  get kvValuesPerToken(): number {
    return kvValuesPerToken(this.model);
  }

  /** A family the graphs do not compute is refused here, before a worker starts. */
  async init(model: ModelDescription): Promise<void> {
    this.familyGraphs = ortGraphs(model, this.options.maxTableInitializerBytes);
    this.description = model;
    this.client ??= new OrtWorkerClient(this.options.intraOpNumThreads, this.options.executionProviders);
  }

  /** @internal */
  async create(key: string, model: Uint8Array): Promise<void> {
    await this.worker.request({ kind: 'create', key, model }, [model.buffer as ArrayBuffer]);
  }

  async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    if (this.graphs.sharedTable) {
      // Copied, not transferred: the engine hands the same array to loadHead as the tied head.
      const tensor: WireTensor = { type: 'float32', data: weights.tokens, dims: [this.model.vocabSize, this.model.embedding.dim] };
      await this.worker.request({ kind: 'setShared', name: TOKEN_TABLE, tensor });
      this.tableSet = true;
    }
    await this.create('embed', this.graphs.embedding(weights));
  }
  async loadLayer(index: number, weights: LayerTensors): Promise<void> {
    // Two sessions around the KV cache (the family's layer stages): attention reads the cache in place.
    const { qkv, rest } = await this.loadTimings.time('ort.layer-graphs', () => this.graphs.layerStages(weights, index));
    await this.loadTimings.time('ort.layer-sessions', async () => {
      await this.create(`layer${index}.qkv`, qkv);
      await this.create(`layer${index}.rest`, rest);
    });
  }
  async loadHead(weights: HeadWeights): Promise<void> {
    this.streamed.residentHead();
    this.tableHeadFeeds = undefined;
    if (this.graphs.sharedTable) {
      // The output projection is the shared token table; the other head weights become worker tensors of their own.
      const feeds: Record<string, string> = {};
      for (const { key, input, dims } of this.graphs.headInputs()) {
        if (key === 'lmHead' && this.graphs.tiedTable) {
          // Under offloading the embedding is not loaded here (it lives on its tiers): the head brings the table.
          if (!this.tableSet) await this.worker.request({ kind: 'setShared', name: TOKEN_TABLE, tensor: { type: 'float32', data: weights.lmHead, dims } });
          this.tableSet = true;
          feeds[input] = TOKEN_TABLE;
          continue;
        }
        const data = weights[key];
        if (!data) throw new Error(`OrtBackend: the head needs ${key} (${this.model.name})`);
        await this.worker.request({ kind: 'setShared', name: `table.${input}`, tensor: { type: 'float32', data, dims } });
        feeds[input] = `table.${input}`;
      }
      this.tableHeadFeeds = feeds;
    }
    await this.create('head', this.graphs.head(weights));
  }

  /** The embedding session's run for ids and model positions `[batch * seq]`. */
  private embedRun(ids: Int32Array, positions: Int32Array, batch: number, seq: number): { run: SessionRun; transfer: ArrayBuffer[] } {
    const a = int64(ids);
    const p = int64(positions);
    return { run: { key: 'embed', shared: this.graphs.sharedTable ? [TOKEN_TABLE] : [], feeds: this.graphs.embedFeeds(a, p, [batch, seq]) }, transfer: [a.buffer as ArrayBuffer, p.buffer as ArrayBuffer] };
  }

  async embed(ids: Int32Array, positions: Int32Array, batch: number, seq: number): Promise<Float32Array> {
    const { run, transfer } = this.embedRun(ids, positions, batch, seq);
    const out = await this.worker.request({ kind: 'run', ...run }, transfer);
    return out.hidden!.data as Float32Array;
  }

  /** Rotary families: the step's cos/sin `[batch * seq, headDim]` from its model positions and key count. */
  private ropeTables(positions: Int32Array | undefined, rows: number, keys: number): RopeTables | undefined {
    const rope = this.graphs.rope;
    if (!rope) return undefined;
    if (!positions || positions.length !== rows) throw new Error(`OrtBackend: ${this.model.family} layers need the step's ${rows} model positions (StepShape.positions)`);
    const { cos, sin } = rope(positions, keys);
    const dims = [rows, this.model.attention.headDim];
    return { cos: { type: 'float32', data: cos, dims }, sin: { type: 'float32', data: sin, dims } };
  }

  async setStep(step: StepShape): Promise<void> {
    this.step = step;
    const T = step.pastLen + step.seq;
    // Sent once per step (a copy, the caller keeps its array); every layer call reuses it.
    const dims = [step.batch, 1, step.seq, T];
    await this.worker.request({ kind: 'setShared', name: 'mask', tensor: { type: 'float32', data: step.maskBias, dims } });
    const window = this.graphs.window;
    if (window) {
      const data = windowMask(step.maskBias, step.batch, step.seq, step.pastLen, window.size);
      await this.worker.request({ kind: 'setShared', name: WINDOW_MASK, tensor: { type: 'float32', data, dims } }, transferable(data));
    }
    const rope = this.ropeTables(step.positions, step.batch * step.seq, T);
    if (rope) {
      await this.worker.request({ kind: 'setShared', name: 'cos', tensor: rope.cos }, transferable(rope.cos.data as Float32Array));
      await this.worker.request({ kind: 'setShared', name: 'sin', tensor: rope.sin }, transferable(rope.sin.data as Float32Array));
    }
  }

  async layer(index: number, hidden: Float32Array, past: KvPair): Promise<{ hidden: Float32Array; present: KvPair }> {
    const step = this.step;
    if (!step) throw new Error('OrtBackend: setStep must be called before layer()');
    const d = this.model;
    const { kvHeads, headDim } = d.attention;
    const pastDims = [step.batch, kvHeads, step.pastLen, headDim];
    const sharedAs = this.streamed.sharedAs(index);
    const rope = this.graphs.rope ? { cos: 'cos', sin: 'sin' } : undefined;
    // Gemma 2's windowed layers read the step's windowed mask (setStep), the others the engine's.
    const mask = this.graphs.window?.layer(index) ? WINDOW_MASK : 'mask';
    const x: WireTensor = { type: 'float32', data: hidden, dims: [step.batch, step.seq, d.hiddenSize] };
    const out = sharedAs
      ? await this.streamedLayer(this.streamed.sessionKey(index), { ...sharedAs, mask }, x, past, pastDims, rope ? ['cos', 'sin'] : [])
      : await this.worker.request(
          { kind: 'pastLayer', key: `layer${index}`, heads: kvHeads, headDim, pastLen: step.pastLen, x, pastK: past.k, pastV: past.v, mask, ...(rope ? { rope } : {}) },
          transferable(hidden, past.k, past.v),
        );
    return { hidden: out.y!.data as Float32Array, present: { k: out.present_k!.data as Float32Array, v: out.present_v!.data as Float32Array } };
  }

  private streamedLayer(key: string, sharedAs: Record<string, string>, x: WireTensor, past: KvPair, pastDims: number[], ropeShared: string[]) {
    return this.worker.request(
      {
        kind: 'run',
        key,
        shared: ropeShared,
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
    const d = this.model;
    const embed = this.embedRun(input.ids, input.positions, batch, input.seq);
    const keys = mask.dims[3]!;
    const rope = this.ropeTables(input.positions, batch * input.seq, keys);
    const window = this.graphs.window;
    const windowed: WireTensor | undefined = window && { type: 'float32', data: windowMask(mask.data as Float32Array, batch, input.seq, keys - input.seq, window.size), dims: mask.dims };
    const out = await this.worker.request(
      {
        kind: 'kvStep',
        cache,
        batch,
        heads: d.attention.kvHeads,
        queryHeads: d.attention.heads,
        headDim: d.attention.headDim,
        embed: embed.run,
        mask,
        ...(windowed ? { windowMask: windowed } : {}),
        ...(rope ? { rope } : {}),
        layers: Array.from({ length: d.layers }, (_, index) => ({ index, layer: this.layerRun(index), ...(window?.layer(index) ? { windowed: true } : {}) })),
      },
      [...transferable(mask.data), ...(windowed ? transferable(windowed.data) : []), ...embed.transfer, ...(rope ? transferable(rope.cos.data as Float32Array, rope.sin.data as Float32Array) : [])],
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
    return sharedAs ? { key: this.streamed.sessionKey(index), sharedAs } : { key: `layer${index}` };
  }

  async head(hidden: Float32Array, rows: number): Promise<Float32Array> {
    const streamed = this.streamed.headFeeds() ?? this.tableHeadFeeds;
    const out = await this.worker.request(
      { kind: 'run', key: 'head', shared: [], ...(streamed ? { sharedAs: streamed } : {}), feeds: { x: { type: 'float32', data: hidden, dims: [rows, this.model.hiddenSize] } } },
      transferable(hidden),
    );
    return out.logits!.data as Float32Array;
  }

  async dispose(): Promise<void> {
    await this.client?.terminate();
    this.client = undefined;
  }
}
