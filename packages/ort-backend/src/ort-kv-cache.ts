import type { BackendKvCache, StepShape } from '@flexhelm/contract';
import type { WireTensor } from './ort-protocol.js';

/** What a worker-held cache needs of its backend (`OrtBackend`): the step round trip and the cache's release. */
export interface WorkerKvHost {
  readonly layerCount: number;
  /** Float32 K and V values one row adds per token and layer (`kvValuesPerToken`: the key/value heads). */
  readonly kvValuesPerToken: number;
  kvStep(cache: number, batch: number, input: { ids: Int32Array; positions: Int32Array; seq: number }, mask: WireTensor): Promise<Float32Array>;
  kvClose(cache: number): Promise<void>;
  kvExpand(cache: number, rows: number): Promise<void>;
}

/** Frees the worker's copy when a batch is dropped without `close()`. */
const dropped = new FinalizationRegistry<{ backend: WorkerKvHost; id: number }>(({ backend, id }) => {
  backend.kvClose(id).catch(() => {});
});

/**
 * The main-thread handle of a KV cache held in the onnxruntime worker (`OrtBackend.openKvCache`): `forward` runs a
 * whole step (embedding and every layer) in one round trip.
 */
export class OrtKvCache implements BackendKvCache {
  private tokens = 0;
  private closed = false;

  constructor(
    private readonly backend: WorkerKvHost,
    private readonly id: number,
    private batch: number,
  ) {
    dropped.register(this, { backend, id }, this);
  }

  async forward(ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array> {
    this.check(step.batch);
    const T = step.pastLen + step.seq;
    const mask = { type: 'float32' as const, data: step.maskBias, dims: [step.batch, 1, step.seq, T] };
    const hidden = await this.backend.kvStep(this.id, this.batch, { ids, positions, seq: step.seq }, mask);
    this.tokens = T;
    return hidden;
  }

  /** Copies the one row's cache in the worker to `rows` rows (see `BackendKvCache.expandRows`). */
  async expandRows(rows: number): Promise<void> {
    this.check(this.batch);
    if (this.batch !== 1) throw new Error(`OrtKvCache: expandRows needs a cache of one row, this one has ${this.batch}`);
    if (!Number.isInteger(rows) || rows < 1) throw new Error(`OrtKvCache: expandRows takes a whole number of rows ≥ 1, got ${rows}`);
    if (this.tokens === 0) throw new Error('OrtKvCache: expandRows needs a step first (the cache holds nothing to copy)');
    await this.backend.kvExpand(this.id, rows);
    this.batch = rows;
  }

  /** RAM of the cache in the worker (float32 K and V of every layer, without the growth headroom). */
  get bytes(): number {
    return 4 * this.backend.layerCount * this.batch * this.tokens * this.backend.kvValuesPerToken;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    dropped.unregister(this);
    await this.backend.kvClose(this.id);
  }

  private check(batch: number): void {
    if (this.closed) throw new Error('OrtKvCache: the cache was closed; start a new batch');
    if (batch !== this.batch) throw new Error(`OrtKvCache: opened for ${this.batch} rows, stepped with ${batch}`);
  }
}
