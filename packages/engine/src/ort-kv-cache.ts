import type { BackendKvCache, StepShape } from './opt-backend.js';
import type { OrtBackend } from './ort-backend.js';

/** Frees the worker's copy when a batch is dropped without `close()`. */
const dropped = new FinalizationRegistry<{ backend: OrtBackend; id: number }>(({ backend, id }) => {
  backend.kvClose(id).catch(() => {});
});

/**
 * The main-thread handle of a KV cache held in the onnxruntime worker (`OrtBackend.openKvCache`): `forward` runs a
 * whole step (embedding and every layer) in one round trip; `layer` runs one layer after the backend's `setStep` and
 * `embed`, as the engine's generic path does.
 */
export class OrtKvCache implements BackendKvCache {
  private tokens = 0;
  private closed = false;

  constructor(
    private readonly backend: OrtBackend,
    private readonly id: number,
    private readonly batch: number,
  ) {
    dropped.register(this, { backend, id }, this);
  }

  async forward(ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array> {
    this.check(step.batch);
    const T = step.pastLen + step.seq;
    const layers = Array.from({ length: this.backend.layerCount }, (_, i) => i);
    const mask = { type: 'float32' as const, data: step.maskBias, dims: [step.batch, 1, step.seq, T] };
    const hidden = await this.backend.kvStep(this.id, this.batch, layers, { embed: { ids, positions, seq: step.seq } }, mask);
    this.tokens = T;
    return hidden;
  }

  async layer(index: number, hidden: Float32Array): Promise<Float32Array> {
    this.check(this.batch);
    const seq = hidden.length / (this.batch * this.backend.hiddenSize);
    const out = await this.backend.kvStep(this.id, this.batch, [index], { hidden, seq }, 'mask');
    if (index === this.backend.layerCount - 1) this.tokens += seq;
    return out;
  }

  /** RAM of the cache in the worker (float32 K and V of every layer, without the growth headroom). */
  get bytes(): number {
    return 2 * 4 * this.backend.layerCount * this.batch * this.tokens * this.backend.hiddenSize;
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
