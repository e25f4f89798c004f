import { existsSync, statSync } from 'node:fs';
import { LlamaCheckpoint } from './llama-checkpoint.js';
import { readFolderModel } from './families/registry.js';
import { isOptShaped, type BatchNeed, type EmbeddingWeights, type HeadWeights, type OwnEndWeight, type Decoder, type DecoderBatch, type LayerTensors, type ModelDescription, MASK_BIAS, type BackendKvCache, type DecoderBackend, jsLogitsMath, type LogitsMath, PhaseTotals, reportPhase } from '@flexhelm/contract';
import { descriptionByName } from './description-by-name.js';
import { OptWeights, type OpenOptions } from './families/opt/opt-weights.js';
import { openTensorSource } from './open-tensor-source.js';
import { DescriptionTensorSource, DummyTensorSource } from './random-weights.js';
import { ReferenceBackend } from './reference-backend.js';
import type { TensorSource } from './tensor-source.js';
import { checkRequestMemory, type MemoryBudget } from './memory-budget.js';

export interface EngineOptions extends OpenOptions {
  /**
   * Compute backend (required): an instance of a `DecoderBackend` (`OrtBackend` from @flexhelm/ort-backend,
   * `OneDnnBackend`, `OffloadingBackend`, ...) or `reference` (plain TS, in this package). The engine names no
   * runtime itself, so loading a model never pulls onnxruntime or a native addon in unless the caller chose one.
   */
  backend: 'reference' | DecoderBackend;
  /** The RAM budget requests are checked against (`generate` refuses what cannot fit); none: unchecked. */
  memory?: MemoryBudget;
}

function makeBackend(options: EngineOptions): DecoderBackend {
  const b = (options as Partial<EngineOptions>).backend;
  if (b === 'reference') return new ReferenceBackend();
  // JavaScript callers (and the `onnxruntime` name, which this package no longer resolves) get a clear error here.
  if (typeof b !== 'object' || b === null || typeof b.init !== 'function') {
    throw new Error(
      `Engine: options.backend must be 'reference' or a DecoderBackend instance (e.g. new OrtBackend() from @flexhelm/ort-backend); got ${typeof b === 'string' ? `'${b}'` : String(b)}`,
    );
  }
  return b;
}

/** A checkpoint read stage by stage: layers keyed by `description.layerTensors[].key`, Linear weights `[in, out]`. */
/** A model's weights as the backends take them (layers in the `[in, out]` layout), one part at a time. */
export interface ModelWeights {
  /** With `'tokens'` in `own` the token table may be left unread (an empty array in its place). */
  embedding(own?: ReadonlySet<OwnEndWeight>): EmbeddingWeights;
  /** Layer `i`'s tensors; keys in `skip` (a backend's own weights) may be left unread. */
  layer(i: number, skip?: ReadonlySet<string>): LayerTensors;
  /** `tokens`: the token table already read (a tied head reuses it); with `'lmHead'` in `own` the head is left unread. */
  head(tokens?: Float32Array, own?: ReadonlySet<OwnEndWeight>): HeadWeights;
  close(): void;
}

/**
 * A loaded decoder-only model of any family a `ModelDescription` describes (OPT, Llama, Mistral, Qwen2): backend with
 * its weights, and the forward pass over left-padded batches with a KV cache (`startBatch`). Generation is in
 * `generate()` (generate.ts), built on this. (The name stays `Engine` for its callers.)
 */
export class Engine implements Decoder {
  private constructor(
    readonly description: ModelDescription,
    readonly backend: DecoderBackend,
    /** The RAM budget requests are checked against (`EngineOptions.memory`). */
    readonly memory?: MemoryBudget,
  ) {}

  /**
   * Refuses (`RequestMemoryError`) a request that cannot fit the memory budget even as a batch of its own: its prompt's
   * tokens, what it needs, the budget and how to fix it. `index` names it in the message. Nothing without a budget.
   */
  checkRequestMemory(need: BatchNeed, index?: number): void {
    checkRequestMemory(this.memory, need, index === undefined ? 'the request' : `request ${index}`, this.description.maxPositions);
  }

  /** Whether a batch of `rows` rows shaped by `need` fits the memory budget (always without one). */
  batchFits(rows: number, need: BatchNeed): boolean {
    return !this.memory || this.memory.needBytes(rows, need) <= this.memory.limitBytes;
  }

  /**
   * Loads a model folder (config.json of any supported `model_type` + safetensors, sharded safetensors, or FlexLLMGen
   * .npy files for OPT) or a FlexLLMGen numpy folder with its model given by description or built-in name.
   */
  static async load(modelPath: string, options: EngineOptions & { config?: ModelDescription | string }): Promise<Engine> {
    if (!existsSync(modelPath)) throw new Error(`model path ${modelPath} does not exist`);
    let config: ModelDescription;
    const isDir = statSync(modelPath).isDirectory();
    if (options.config) config = typeof options.config === 'string' ? descriptionByName(options.config) : options.config;
    else if (isDir && existsSync(`${modelPath}/config.json`)) config = readFolderModel(modelPath);
    else {
      const name = modelPath.replace(/[\\/]+$/, '').split(/[\\/]/).pop()!.replace(/-np$/, '');
      try {
        config = descriptionByName(name);
      } catch {
        throw new Error(`${modelPath} has no config.json and its name does not say which OPT model it is; pass options.config (e.g. 'opt-1.3b')`);
      }
    }
    return Engine.fromSource(config, openTensorSource(modelPath, config.name), options);
  }

  /** A model with random weights generated in memory (benchmarks, tests): a built-in name or any description. */
  static async dummy(config: ModelDescription | string, options: EngineOptions & { seed?: number }): Promise<Engine> {
    const d = typeof config === 'string' ? descriptionByName(config) : config;
    const seed = options.seed ?? 0;
    return Engine.fromSource(d, isOptShaped(d) ? new DummyTensorSource(d, seed) : new DescriptionTensorSource(d, seed), options);
  }

  /** Loads every stage into the backend, one layer at a time (only one layer's float32 copy is alive at once). */
  static async fromSource(model: ModelDescription, source: TensorSource, options: EngineOptions): Promise<Engine> {
    let description = model;
    let weights: ModelWeights;
    try {
      if (isOptShaped(model)) {
        // OPT's reader checks the sizes and gives its own description back (OPT's token ids where `model` has none).
        const opt = new OptWeights(model, source, options);
        description = opt.description;
        weights = optModelWeights(opt);
      } else weights = new LlamaCheckpoint(model, source);
    } catch (err) {
      source.close();
      throw err;
    }
    return Engine.fromWeights(description, weights, options);
  }

  /**
   * Loads weights already in the backends' layout (benchmarks that make weights of a shape without a checkpoint),
   * one layer at a time, into the backend `options` names; `weights` is closed afterwards.
   */
  static async fromWeights(description: ModelDescription, weights: ModelWeights, options: EngineOptions): Promise<Engine> {
    // FLEXHELM_TIMINGS: where the load goes (checkpoint reads and conversion, transposes, the backend's packing).
    const totals = new PhaseTotals();
    const started = performance.now();
    const backend = makeBackend(options);
    try {
      await totals.time('engine.backend-init', () => backend.init(description));
      await totals.time('engine.embedding-and-head', () => loadEnds(backend, weights));
      await loadLayersPipelined(backend, weights, description.layers, totals);
    } catch (err) {
      await backend.dispose();
      throw err;
    } finally {
      weights.close();
    }
    totals.report();
    backend.loadTimings?.report();
    reportPhase('engine.load', performance.now() - started, `${backend.name}, ${description.layers} layers`);
    return new Engine(description, backend, options.memory);
  }

  /** Starts a batch of left-padded rows (mask 0 marks padding); returns the state that runs forward steps. */
  startBatch(batch: number): BatchRun {
    return new BatchRun(this, batch);
  }

  /** A forward without a cache to keep: one step over a fresh batch; the logits of every position `[rows·seq, vocab]`. */
  async forwardLogits(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const run = this.startBatch(ids.length);
    try {
      return await run.stepLogits(ids, mask);
    } finally {
      await run.close();
    }
  }

  async close(): Promise<void> {
    await this.backend.dispose();
  }
}

/** OPT's checkpoint reader with its layers in the backends' `[in, out]` layout. */
function optModelWeights(w: OptWeights): ModelWeights {
  return {
    embedding: () => w.embedding(),
    // Read, decoded and transposed in one pass per tensor (what transposeLayerTensors would give).
    layer: (i) => w.layerInOut(i) as unknown as LayerTensors,
    head: (tokens) => w.head(tokens),
    close: () => w.close(),
  };
}

/**
 * Reads layer i + 1 while the backend loads layer i (onnxruntime builds its sessions in its worker thread, oneDNN packs
 * on the libuv pool): the read, decode and transpose on this thread overlap the backend's work instead of waiting for
 * it. At most one layer is read ahead, so at most two layers' float32 copies are alive; loads never overlap each other,
 * and a failing read still waits for the load in flight before the error goes up (the backend is then disposed idle).
 */
async function loadLayersPipelined(backend: DecoderBackend, weights: ModelWeights, layers: number, totals: PhaseTotals): Promise<void> {
  let inFlight: Promise<void> | undefined;
  for (let i = 0; i < layers; i++) {
    let layer: LayerTensors;
    const t0 = performance.now();
    try {
      layer = weights.layer(i, backend.ownLayerWeights?.(i));
    } catch (err) {
      await inFlight?.catch(() => {});
      throw err;
    }
    totals.add('engine.layer-read', performance.now() - t0);
    await totals.time('engine.layer-load-wait', () => inFlight);
    inFlight = backend.loadLayer(i, layer);
    // Handled now (its error is thrown by the await above on the next turn): a load failing while this thread reads
    // would otherwise be an unhandled rejection, which ends the process.
    inFlight.catch(() => {});
    // Let the load reach its worker or thread pool (its first steps are microtasks) before this thread reads on.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  await totals.time('engine.layer-load-wait', () => inFlight);
}

/**
 * Embedding and head, in a function of their own so no reference to their float32 arrays outlives it: the layers
 * that load next can reuse that memory instead of holding a second copy of the (large) embedding next to the backend's.
 */
async function loadEnds(backend: DecoderBackend, weights: ModelWeights): Promise<void> {
  const own = backend.ownEndWeights?.();
  const embedding = weights.embedding(own);
  await backend.loadEmbedding(embedding);
  await backend.loadHead(weights.head(embedding.tokens, own));
}

/**
 * Thrown when a model computes NaN or ±Infinity logits from finite inputs (an overflowing weight, a broken norm): the
 * batch fails with the model's name rather than returning NaN/Inf logprobs.
 */
export class NonFiniteOutputError extends Error {
  override name = 'NonFiniteOutputError';
}

/**
 * One pass over the logits (cheap beside the head that made them; the backend's native `allFinite` where it has one):
 * the first non-finite value fails the batch.
 */
function checkFiniteLogits(logits: Float32Array, d: ModelDescription, backend: string, math: LogitsMath = jsLogitsMath): void {
  if (math.allFinite(logits)) return;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (v - v !== 0) {
      const row = Math.floor(i / d.vocabSize);
      throw new NonFiniteOutputError(
        `the model ${d.name} computed a non-finite logit (${v} for token ${i % d.vocabSize} in row ${row}) on the ${backend} backend from finite inputs: ` +
          'its weights overflow (a value near the float32 limit, an Inf/NaN in bf16/f16) or its config is broken; check the checkpoint',
      );
    }
  }
}

/**
 * The state of one batch through the model: the attention mask so far and the backend's KV cache of the batch
 * (`DecoderBackend.openKvCache`). `step` feeds new tokens for every row and returns their final hidden states.
 */
export class BatchRun implements DecoderBatch {
  /** mask[b] over all tokens fed so far (1 real, 0 pad). */
  readonly mask: number[][];
  private cache: BackendKvCache;
  /** ids[b] fed so far, kept only where a step may have to recompute the sequence (longrope: `longropeLimit`). */
  private readonly fed?: number[][];
  private length = 0;
  private closed = false;
  private rows: number;
  /** The backend's native logits arithmetic (exactly contract's `jsLogitsMath`), when it has one. */
  readonly logitsMath?: LogitsMath;

  constructor(
    private readonly engine: Engine,
    batch: number,
  ) {
    this.rows = batch;
    this.logitsMath = engine.backend.logitsMath;
    this.mask = Array.from({ length: batch }, () => []);
    this.cache = engine.backend.openKvCache(batch);
    if (longropeLimit(engine.description) !== undefined) this.fed = Array.from({ length: batch }, () => []);
  }

  /** Rows of the batch (grows once with `expandRows`). */
  get batch(): number {
    return this.rows;
  }

  /** Whether the backend's cache can copy a one-row batch to more rows (`BackendKvCache.expandRows`). */
  get canExpandRows(): boolean {
    return typeof this.cache.expandRows === 'function';
  }

  /**
   * Turns a batch of one row that has been stepped into `rows` rows, each continuing from a copy of that row's cache
   * and mask: a prompt prefix shared by several rows is computed once, then each row feeds its own rest.
   */
  async expandRows(rows: number): Promise<void> {
    if (this.closed) throw new Error('expandRows: this batch run was closed; start a new one with engine.startBatch()');
    if (!this.cache.expandRows) throw new Error(`expandRows: the ${this.engine.backend.name} backend's KV cache cannot copy rows (check canExpandRows first)`);
    if (this.rows !== 1) throw new Error(`expandRows: needs a batch of one row, this one has ${this.rows}`);
    if (this.length === 0) throw new Error('expandRows: step the row first (there is nothing to copy yet)');
    if (!Number.isInteger(rows) || rows < 1) throw new Error(`expandRows: rows must be a whole number ≥ 1, got ${rows}`);
    await this.cache.expandRows(rows);
    for (let b = 1; b < rows; b++) this.mask.push([...this.mask[0]!]);
    if (this.fed) for (let b = 1; b < rows; b++) this.fed.push([...this.fed[0]!]);
    this.rows = rows;
  }

  /** Tokens fed so far per row (padding included). */
  get tokens(): number {
    return this.length;
  }

  /**
   * Feeds `ids[b]` (all rows the same length S) with their mask entries; returns hidden `[batch, S, hidden]` after the
   * last layer. Positions follow transformers: `cumsum(mask) * mask - 1`, so position 0 is each row's first real token
   * (pads -1), plus the learned table's offset (OPT: 2; rotary positions have none). With a sliding window, query i
   * sees key j only if i − j < window (padded indices, as transformers' mask).
   */
  async step(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const d = this.engine.description;
    const offset = d.positions.kind === 'learned' ? d.positions.offset : 0;
    // A window on every layer goes into the mask; one on some layers only (Gemma 2) is each layer's to apply.
    const window = d.attention.slidingWindowLayers === 'even' ? Infinity : (d.attention.slidingWindow ?? Infinity);
    const B = this.batch;
    const S = ids[0]?.length ?? 0;
    if (ids.length !== B || mask.length !== B) throw new Error(`step: expected ${B} rows of ids and mask, got ${ids.length} and ${mask.length}`);
    if (S === 0) throw new Error('step: at least one token per row is required');
    if (this.closed) throw new Error('step: this batch run was closed; start a new one with engine.startBatch()');
    const P = this.length;
    const T = P + S;
    const limit = longropeLimit(d);
    if (this.fed && limit !== undefined && P > 0 && P <= limit && T > limit) return this.recomputeLong(ids, mask);
    const flatIds = new Int32Array(B * S);
    const positions = new Int32Array(B * S);
    for (let b = 0; b < B; b++) {
      if (ids[b]!.length !== S || mask[b]!.length !== S) throw new Error(`step: row ${b} has ${ids[b]!.length} ids and ${mask[b]!.length} mask entries, expected ${S}`);
      let seen = this.mask[b]!.reduce((a, m) => a + m, 0);
      for (let s = 0; s < S; s++) {
        const id = ids[b]![s]!;
        if (!Number.isInteger(id) || id < 0 || id >= d.vocabSize) throw new Error(`token id ${id} (row ${b}) is outside the vocabulary 0..${d.vocabSize - 1}`);
        const m = mask[b]![s]! ? 1 : 0;
        seen += m;
        if (seen > d.maxPositions) {
          throw new Error(`row ${b} reaches ${seen} tokens, beyond ${d.name}'s ${d.maxPositions} positions; shorten the prompt or max_new_tokens`);
        }
        flatIds[b * S + s] = id;
        if (this.fed) this.fed[b]!.push(id);
        positions[b * S + s] = seen * m - 1 + offset;
        this.mask[b]!.push(m);
      }
    }
    // maskBias[b, s, t]: query at slot P+s sees key t when t <= P+s, key t is not padding and lies inside the window.
    const maskBias = new Float32Array(B * S * T);
    for (let b = 0; b < B; b++) {
      const keyMask = this.mask[b]!;
      for (let s = 0; s < S; s++) {
        const row = (b * S + s) * T;
        for (let t = 0; t < T; t++) maskBias[row + t] = t <= P + s && P + s - t < window && keyMask[t] ? 0 : MASK_BIAS;
      }
    }
    const hidden = await this.cache.forward(flatIds, positions, { batch: B, seq: S, pastLen: P, maskBias, positions });
    this.length = T;
    return hidden;
  }

  /**
   * Phi-3's longrope switch, as transformers 4.47.1 generates: the step whose key count first passes
   * `originalMaxPositions` (the cache holding keys rotated with the short factors) drops the cache and feeds the
   * whole sequence again, so every key is rotated with the long factors. Returns the hidden of the new tokens only.
   */
  private async recomputeLong(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const fed = this.fed!;
    const allIds = fed.map((row, b) => [...row, ...ids[b]!]);
    const allMask = this.mask.map((row, b) => [...row, ...mask[b]!]);
    await this.cache.close();
    this.cache = this.engine.backend.openKvCache(this.batch);
    this.length = 0;
    for (let b = 0; b < this.batch; b++) {
      this.mask[b]!.length = 0;
      fed[b]!.length = 0;
    }
    const hidden = await this.step(allIds, allMask);
    const E = this.engine.description.hiddenSize;
    const S = ids[0]!.length;
    const T = allIds[0]!.length;
    const out = new Float32Array(this.batch * S * E);
    for (let b = 0; b < this.batch; b++) out.set(hidden.subarray((b * T + T - S) * E, (b * T + T) * E), b * S * E);
    return out;
  }

  /** Logits `[rows.length, vocab]` for the given (row, position-in-last-step) hidden vectors. */
  async logits(hidden: Float32Array, seq: number, picks: { row: number; pos: number }[]): Promise<Float32Array> {
    const E = this.engine.description.hiddenSize;
    const x = new Float32Array(picks.length * E);
    picks.forEach((p, i) => { x.set(hidden.subarray((p.row * seq + p.pos) * E, (p.row * seq + p.pos + 1) * E), i * E); });
    const logits = await this.engine.backend.head(x, picks.length);
    checkFiniteLogits(logits, this.engine.description, this.engine.backend.name, this.logitsMath);
    return logits;
  }

  /** `step`, then the logits of every position of the step `[rows·seq, vocab]` (row-major: row, then position). */
  async stepLogits(ids: number[][], mask: number[][]): Promise<Float32Array> {
    const seq = ids[0]?.length ?? 0;
    const hidden = await this.step(ids, mask);
    return this.logits(hidden, seq, ids.flatMap((_, row) => Array.from({ length: seq }, (__, pos) => ({ row, pos }))));
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

/** The key count past which a longrope model switches to its long factors; undefined for other position kinds. */
function longropeLimit(d: ModelDescription): number | undefined {
  return d.positions.kind === 'rope' && d.positions.scaling?.kind === 'longrope' ? d.positions.scaling.originalMaxPositions : undefined;
}
