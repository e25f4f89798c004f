/**
 * Wall time during which at least one I/O activity runs (weight loads, cache loads and stores), overlapping
 * activities counted once: the "io" that FlexLLMGen's overlap target `wall ≤ max(io, compute)` compares against.
 */
export class IoClock {
  private active = 0;
  private since = 0;

  /** `onBusy` receives each stretch of busy time as it ends. */
  constructor(private readonly onBusy: (ms: number) => void) {}

  async track<T>(work: () => Promise<T>): Promise<T> {
    if (this.active++ === 0) this.since = performance.now();
    try {
      return await work();
    } finally {
      if (--this.active === 0) this.onBusy(performance.now() - this.since);
    }
  }
}
