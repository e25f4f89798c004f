/** Buffers below this many floats are allocated plainly: small ones are cheap and not worth tracking. */
const MIN_POOLED = 1 << 16;

/** The capacity a request of `n` floats gets: the next of 8 steps per power of two (at most 12.5% unused). */
export function bucketCapacity(n: number): number {
  if (n <= MIN_POOLED) return n;
  const octave = 2 ** Math.floor(Math.log2(n));
  const step = octave / 8;
  return Math.ceil(n / step) * step;
}

/**
 * Reuses the large float32 buffers of the forward pass (KV cache, hidden states), for the onnxruntime worker's cache
 * and the oneDNN backend alike. Memory touched for the first time
 * is very slow on VMs that hand freed pages back to the host: 34 MiB buffers cost ~0.3 s each to allocate and fill on
 * the development VM (about 110 MB/s), so allocating each decode step's KV cache afresh made opt-1.3b decode at
 * 8 × 512 tokens take ~6.7 s per step. Buffers given back are handed out again for requests of the same capacity
 * bucket; the pool keeps at most `maxBytes`, dropping its smallest buffers first.
 */
export class BufferPool {
  private readonly free = new Map<number, Float32Array[]>();
  private readonly base = new WeakMap<Float32Array, Float32Array>();
  private pooledBytes = 0;

  constructor(
    private readonly allocate: (length: number) => Float32Array,
    private readonly maxBytes: number,
  ) {}

  /**
   * A buffer of exactly `length` floats, a view of a pooled one when large. Contents are undefined, unless `zeroed`
   * (a reused buffer is cleared; a new one is taken to come zeroed from `allocate`, and is not touched here).
   */
  take(length: number, zeroed = false): Float32Array {
    if (length <= MIN_POOLED) return this.allocate(length);
    const capacity = bucketCapacity(length);
    const list = this.free.get(capacity);
    let buffer = list?.pop();
    if (buffer) {
      this.pooledBytes -= 4 * capacity;
      if (zeroed) buffer.fill(0, 0, length);
    } else buffer = this.allocate(capacity);
    const view = buffer.subarray(0, length);
    this.base.set(view, buffer);
    return view;
  }

  /** Gives back a buffer from `take` that nobody reads any more; anything else is ignored. */
  give(view: Float32Array): void {
    const buffer = this.base.get(view);
    if (!buffer) return;
    this.base.delete(view);
    const list = this.free.get(buffer.length) ?? [];
    list.push(buffer);
    this.free.set(buffer.length, list);
    this.pooledBytes += 4 * buffer.length;
    for (const capacity of [...this.free.keys()].sort((a, b) => a - b)) {
      if (this.pooledBytes <= this.maxBytes) break;
      const victims = this.free.get(capacity)!;
      while (victims.length && this.pooledBytes > this.maxBytes) this.pooledBytes -= 4 * victims.pop()!.length;
      if (!victims.length) this.free.delete(capacity);
    }
  }

  /** Bytes held for reuse. */
  get bytes(): number {
    return this.pooledBytes;
  }

  clear(): void {
    this.free.clear();
    this.pooledBytes = 0;
  }
}
