import { existsSync, statSync } from 'node:fs';
import { MASK_BIAS, type BackendKvCache, type OptBackend } from './opt-backend.js';
import { OPT_POSITION_OFFSET, optConfigByName, readOptConfig, type OptConfig } from './opt-config.js';
import { OptWeights, openTensorSource, type OpenOptions } from './opt-weights.js';
import { OrtBackend } from './ort-backend.js';
import { DummyTensorSource } from './random-weights.js';
import { ReferenceBackend } from './reference-backend.js';
import type { TensorSource } from './tensor-source.js';

export interface EngineOptions extends OpenOptions {
  /** Compute backend: `onnxruntime` (default, fp32 in a worker thread), `reference` (plain TS), or an instance. */
  backend?: 'onnxruntime' | 'reference' | OptBackend;
  /** onnxruntime intra-op threads. */
  intraOpNumThreads?: number;
}

function makeBackend(options: EngineOptions): OptBackend {
  const b = options.backend ?? 'onnxruntime';
  if (b === 'onnxruntime') return new OrtBackend({ intraOpNumThreads: options.intraOpNumThreads });
  if (b === 'reference') return new ReferenceBackend();
  return b;
}

/**
 * A loaded OPT model: config, backend with its weights, and the forward pass over left-padded batches with a KV
 * cache (`startBatch`). Generation is in `generate()` (generate.ts), built on this.
 */
export class OptEngine {
  private constructor(
    readonly config: OptConfig,
    readonly backend: OptBackend,
  ) {}

  /**
   * Loads a model folder (config.json + safetensors, sharded safetensors, or FlexLLMGen .npy files) or a FlexLLMGen
   * numpy folder with a config given by name.
   */
  static async load(modelPath: string, options: EngineOptions & { config?: OptConfig | string } = {}): Promise<OptEngine> {
    if (!existsSync(modelPath)) throw new Error(`model path ${modelPath} does not exist`);
    let config: OptConfig;
    if (options.config) config = typeof options.config === 'string' ? optConfigByName(options.config) : options.config;
    else if (statSync(modelPath).isDirectory() && existsSync(`${modelPath}/config.json`)) config = readOptConfig(modelPath);
    else {
      const name = modelPath.replace(/[\\/]+$/, '').split(/[\\/]/).pop()!.replace(/-np$/, '');
      try {
        config = optConfigByName(name);
      } catch {
        throw new Error(`${modelPath} has no config.json and its name does not say which OPT model it is; pass options.config (e.g. 'opt-1.3b')`);
      }
    }
    return OptEngine.fromSource(config, openTensorSource(modelPath, config.name), options);
  }

  /** A model with random weights generated in memory (benchmarks, tests). */
  static async dummy(config: OptConfig | string, options: EngineOptions & { seed?: number } = {}): Promise<OptEngine> {
    const c = typeof config === 'string' ? optConfigByName(config) : config;
    return OptEngine.fromSource(c, new DummyTensorSource(c, options.seed ?? 0), options);
  }

  /** Loads every stage into the backend, one layer at a time (only one layer's float32 copy is alive at once). */
  static async fromSource(config: OptConfig, source: TensorSource, options: EngineOptions = {}): Promise<OptEngine> {
    const weights = new OptWeights(config, source, options);
    const backend = makeBackend(options);
    try {
      await backend.init(config);
      await loadEnds(backend, weights);
      for (let i = 0; i < config.numHiddenLayers; i++) await backend.loadLayer(i, weights.layer(i));
    } catch (err) {
      await backend.dispose();
      throw err;
    } finally {
      weights.close();
    }
    return new OptEngine(config, backend);
  }

  /** Starts a batch of left-padded rows (mask 0 marks padding); returns the state that runs forward steps. */
  startBatch(batch: number): BatchRun {
    return new BatchRun(this, batch);
  }

  async close(): Promise<void> {
    await this.backend.dispose();
  }
}

/**
 * Embedding and head, in a function of their own so no reference to their float32 arrays outlives it: the layers
 * that load next can reuse that memory instead of holding a second copy of the (large) embedding next to the backend's.
 */
async function loadEnds(backend: OptBackend, weights: OptWeights): Promise<void> {
  const embedding = weights.embedding();
  await backend.loadEmbedding(embedding);
  await backend.loadHead(weights.head(embedding.tokens));
}

/**
 * The state of one batch through the model: the attention mask so far and the backend's KV cache of the batch
 * (`OptBackend.openKvCache`). `step` feeds new tokens for every row and returns their final hidden states.
 */
export class BatchRun {
  /** mask[b] over all tokens fed so far (1 real, 0 pad). */
  readonly mask: number[][];
  private readonly cache: BackendKvCache;
  private length = 0;
  private closed = false;

  constructor(
    private readonly engine: OptEngine,
    readonly batch: number,
  ) {
    this.mask = Array.from({ length: batch }, () => []);
    this.cache = engine.backend.openKvCache(batch);
  }

  /** Tokens fed so far per row (padding included). */
  get tokens(): number {
    return this.length;
  }

  /**
   * Feeds `ids[b]` (all rows the same length S) with their mask entries; returns hidden `[batch, S, hidden]` after the
   * last layer. Positions follow transformers: `cumsum(mask) * mask - 1` (+2 offset), so position 0 is each row's first
   * real token.
   */
  async step(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const c = this.engine.config;
    const B = this.batch;
    const S = ids[0]?.length ?? 0;
    if (ids.length !== B || mask.length !== B) throw new Error(`step: expected ${B} rows of ids and mask, got ${ids.length} and ${mask.length}`);
    if (S === 0) throw new Error('step: at least one token per row is required');
    if (this.closed) throw new Error('step: this batch run was closed; start a new one with engine.startBatch()');
    const P = this.length;
    const T = P + S;
    const flatIds = new Int32Array(B * S);
    const positions = new Int32Array(B * S);
    for (let b = 0; b < B; b++) {
      if (ids[b]!.length !== S || mask[b]!.length !== S) throw new Error(`step: row ${b} has ${ids[b]!.length} ids and ${mask[b]!.length} mask entries, expected ${S}`);
      let seen = this.mask[b]!.reduce((a, m) => a + m, 0);
      for (let s = 0; s < S; s++) {
        const id = ids[b]![s]!;
        if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize) throw new Error(`token id ${id} (row ${b}) is outside the vocabulary 0..${c.vocabSize - 1}`);
        const m = mask[b]![s]! ? 1 : 0;
        seen += m;
        if (seen > c.maxPositionEmbeddings) {
          throw new Error(`row ${b} reaches ${seen} tokens, beyond ${c.name}'s ${c.maxPositionEmbeddings} positions; shorten the prompt or max_new_tokens`);
        }
        flatIds[b * S + s] = id;
        positions[b * S + s] = seen * m - 1 + OPT_POSITION_OFFSET;
        this.mask[b]!.push(m);
      }
    }
    // maskBias[b, s, t]: query at slot P+s sees key t when t <= P+s and key t is not padding.
    const maskBias = new Float32Array(B * S * T);
    for (let b = 0; b < B; b++) {
      const keyMask = this.mask[b]!;
      for (let s = 0; s < S; s++) {
        const row = (b * S + s) * T;
        for (let t = 0; t < T; t++) maskBias[row + t] = t <= P + s && keyMask[t] ? 0 : MASK_BIAS;
      }
    }
    const hidden = await this.cache.forward(flatIds, positions, { batch: B, seq: S, pastLen: P, maskBias });
    this.length = T;
    return hidden;
  }

  /** Logits `[rows.length, vocab]` for the given (row, position-in-last-step) hidden vectors. */
  async logits(hidden: Float32Array, seq: number, picks: { row: number; pos: number }[]): Promise<Float32Array> {
    const E = this.engine.config.hiddenSize;
    const x = new Float32Array(picks.length * E);
    picks.forEach((p, i) => { x.set(hidden.subarray((p.row * seq + p.pos) * E, (p.row * seq + p.pos + 1) * E), i * E); });
    return this.engine.backend.head(x, picks.length);
  }

  /** Bytes held by the KV cache in RAM (for memory reports). */
  get kvBytes(): number {
    return this.cache.bytes;
  }

  /** Frees the KV cache now (a backend-owned cache may hold files); the run cannot step afterwards. */
  async close(): Promise<void> {
    this.closed = true;
    await this.cache.close();
  }
}
