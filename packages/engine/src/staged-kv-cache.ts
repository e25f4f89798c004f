import type { BackendKvCache, KvPair, StageCompute, StepShape } from '@flexhelm/contract';

/**
 * The plain KV cache: float32 K/V of every layer in RAM, handed to `StageCompute.layer` and replaced by its present
 * each step. What a backend without a cache form of its own (the reference backend, an all-compute offloading
 * backend) returns from `openKvCache`.
 */
export class StagedKvCache implements BackendKvCache {
  private kv: KvPair[];
  private tokens = 0;
  private closed = false;

  constructor(
    private readonly compute: StageCompute,
    private readonly layers: number,
    /** Float32 values one row adds per token and layer (`kvValuesPerToken`). */
    private readonly kvValuesPerToken: number,
    private batch: number,
  ) {
    this.kv = Array.from({ length: layers }, () => ({ k: new Float32Array(0), v: new Float32Array(0) }));
  }

  async forward(ids: Int32Array, positions: Int32Array, step: StepShape): Promise<Float32Array> {
    if (this.closed) throw new Error('StagedKvCache: the cache was closed; start a new batch');
    if (step.batch !== this.batch) throw new Error(`StagedKvCache: opened for ${this.batch} rows, stepped with ${step.batch}`);
    if (step.pastLen !== this.tokens) throw new Error(`StagedKvCache: holds ${this.tokens} tokens but the step says ${step.pastLen} are cached`);
    await this.compute.setStep(step);
    let hidden = await this.compute.embed(ids, positions, step.batch, step.seq);
    for (let i = 0; i < this.layers; i++) {
      const r = await this.compute.layer(i, hidden, this.kv[i]!);
      hidden = r.hidden;
      this.kv[i] = r.present;
    }
    this.tokens = step.pastLen + step.seq;
    return hidden;
  }

  /** Repeats the single row's K/V (`[1, heads, tokens, headDim]` per layer) `rows` times. */
  async expandRows(rows: number): Promise<void> {
    if (this.closed) throw new Error('StagedKvCache: the cache was closed; start a new batch');
    if (this.batch !== 1) throw new Error(`StagedKvCache: expandRows needs a cache of one row, this one has ${this.batch}`);
    if (!Number.isInteger(rows) || rows < 1) throw new Error(`StagedKvCache: expandRows takes a whole number of rows ≥ 1, got ${rows}`);
    const repeat = (a: Float32Array): Float32Array => {
      const out = new Float32Array(a.length * rows);
      for (let r = 0; r < rows; r++) out.set(a, r * a.length);
      return out;
    };
    this.kv = this.kv.map((p) => ({ k: repeat(p.k), v: repeat(p.v) }));
    this.batch = rows;
  }

  get bytes(): number {
    return 4 * this.layers * this.batch * this.tokens * this.kvValuesPerToken;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.kv = [];
  }
}
