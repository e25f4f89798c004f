import { allocPinned } from '@flexhelm/pinned-memory';

/**
 * Pinned buffers the disk reads of layer files land in: two by default (the layer being converted and the one being
 * read ahead), a further request waits for one to come back. `bytes` grows while files are written, before the first
 * read. A sparse layer's experts read into a pool of their own, sized to one expert.
 */
export class StagingSlots {
  private readonly free: ArrayBuffer[] = [];
  private readonly waiters: ((slot: ArrayBuffer) => void)[] = [];
  private made = 0;
  bytes = 0;

  constructor(private readonly count = 2) {}

  async acquire(): Promise<ArrayBuffer> {
    const free = this.free.pop();
    if (free) return free;
    if (this.made < this.count) {
      this.made++;
      return allocPinned(this.bytes);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(slot: ArrayBuffer): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(slot);
    else this.free.push(slot);
  }
}

/** fp32 arrays the backend gave back (`StreamedLayers.reclaim`), by length, for later conversions to write into. */
export class ArrayRecycler {
  private readonly byLength = new Map<number, Float32Array[]>();

  /** A returned array of `length` floats to convert into (warm memory), or undefined for a fresh one. */
  take(length: number): Float32Array | undefined {
    return this.byLength.get(length)?.pop();
  }

  give(array: Float32Array): void {
    const list = this.byLength.get(array.length) ?? [];
    // A few per size: the schedule has at most a layer converting, one computing and one let go.
    if (list.length < 8) list.push(array);
    this.byLength.set(array.length, list);
  }

  clear(): void {
    this.byLength.clear();
  }
}
