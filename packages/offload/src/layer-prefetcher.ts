import type { HeadWeights, StreamedHead, StreamedLayers, StreamedLayerTensors } from '@flexhelm/engine';
import type { IoClock } from './io-clock.js';
import type { WeightTierStore } from './weight-tier-store.js';

/** Counters the prefetcher adds to (the backend's stats). Times in milliseconds. */
export interface PrefetchStats {
  weightLoads: number;
  headLoads: number;
  ioMs: number;
  computeMs: number;
  stallMs: number;
}

/** A weight load's start and end, for tests and profiling; the streamed head is layer `numHiddenLayers`. */
export type LoadEvent = { kind: 'load-start' | 'load-end'; layer: number };

/**
 * Streams the weights of offloaded layers (and the head) into the compute backend in schedule order: before layer i
 * computes, its weights (read ahead while layer i−1 computed) are handed over and the next streamed unit starts
 * loading — after the last layer the head, after the head the next step's first layer. Loads run in native threads
 * (`WeightTierStore` reads, and converts unless the backend `acceptsF16`); arrays the backend lets go of go back to the
 * store.
 */
export class LayerPrefetcher {
  private readonly inFlight = new Map<number, Promise<StreamedLayerTensors>>();
  private headInFlight?: Promise<Partial<HeadWeights>>;
  /** The streamed head's tensors are in the backend now (until the next layer's arrive). */
  private headSet = false;

  constructor(
    private readonly store: WeightTierStore,
    private readonly layers: StreamedLayers,
    private readonly head: StreamedHead | undefined,
    private readonly stats: PrefetchStats,
    private readonly clock: IoClock,
    private readonly trace?: (event: LoadEvent) => void,
  ) {}

  /** A step starts: its first streamed layer loads while the embedding runs. */
  startStep(): void {
    this.readAheadFrom(this.store.layerCount - 1);
  }

  /** Waits for layer `index`'s streamed weights (if any), starts the next load, hands the weights over. */
  async beforeLayer(index: number): Promise<void> {
    if (!this.store.isStreamed(index)) return this.readAhead(index);
    const waitStart = performance.now();
    const pending = this.inFlight.get(index);
    this.inFlight.delete(index);
    // Loads of other layers (a step left unfinished) are dropped: with f16 hand-over each may hold a staging slot this
    // layer's read waits for.
    for (const j of [...this.inFlight.keys()]) void this.drop(j); // never rejects; its slots come back when the load ends
    const weights = await (pending ?? this.fetchLayer(index));
    this.stats.stallMs += performance.now() - waitStart;
    this.readAhead(index);
    const t0 = performance.now();
    try {
      await this.layers.setLayer(index, weights);
    } catch (e) {
      // Not taken: the arrays go back (an f16 read's staging slot with them).
      this.store.recycle(Object.values(weights));
      throw e;
    }
    this.store.recycle(this.layers.reclaim());
    // The backend may free the head's streamed tensors as a layer's arrive (one streamed unit at a time).
    this.headSet = false;
    this.stats.computeMs += performance.now() - t0;
  }

  /** Before a head call: a streamed head's tensors are handed over (read ahead during the last layer). */
  async beforeHead(): Promise<void> {
    if (!this.head || !this.store.headStreamed || this.headSet) return;
    const waitStart = performance.now();
    const weights = await (this.headInFlight ?? this.fetchHead());
    this.headInFlight = undefined;
    this.stats.stallMs += performance.now() - waitStart;
    // Read ahead: the next step's first streamed layer loads while the head computes.
    this.readAheadFrom(this.store.layerCount - 1);
    const t0 = performance.now();
    await this.head.set(weights);
    this.headSet = true;
    this.stats.computeMs += performance.now() - t0;
  }

  /** Waits for the loads still running (their results are dropped, their arrays given back to the store). */
  async settle(): Promise<void> {
    const layers = [...this.inFlight.keys()].map((j) => this.drop(j));
    await Promise.allSettled([...layers, this.headInFlight]);
    this.headInFlight = undefined;
  }

  /** Forgets layer `index`'s load; its arrays go back to the store when it ends (an f16 read frees its slot). */
  private drop(index: number): Promise<void> {
    const pending = this.inFlight.get(index);
    this.inFlight.delete(index);
    return (pending ?? Promise.resolve({})).then(
      (w) => this.store.recycle(Object.values(w)),
      () => undefined,
    );
  }

  /** Read ahead while layer `index` computes: after the last layer the streamed head, else the next streamed layer. */
  private readAhead(index: number): void {
    if (index === this.store.layerCount - 1 && this.store.headStreamed) {
      if (!this.headSet && !this.headInFlight) this.headInFlight = this.fetchHead();
      return;
    }
    if (this.store.isStreamed(index)) this.readAheadFrom(index);
  }

  /** Starts loading the streamed layer after `index` in schedule order (wrapping to the next step), if any. */
  private readAheadFrom(index: number): void {
    const L = this.store.layerCount;
    for (let d = 1; d <= L; d++) {
      const j = (index + d) % L;
      if (!this.store.isStreamed(j)) continue;
      if (!this.inFlight.has(j)) this.inFlight.set(j, this.fetchLayer(j));
      return;
    }
  }

  private fetchLayer(index: number): Promise<StreamedLayerTensors> {
    return this.clock.track(async () => {
      const started = performance.now();
      this.trace?.({ kind: 'load-start', layer: index });
      // A backend that reads f16 weights gets the stored f16 copies as they are (no widening pass).
      const out = await this.store.readLayer(index, this.layers.acceptsF16 === true);
      this.trace?.({ kind: 'load-end', layer: index });
      this.stats.weightLoads++;
      this.stats.ioMs += performance.now() - started;
      return out;
    });
  }

  private fetchHead(): Promise<Partial<HeadWeights>> {
    return this.clock.track(async () => {
      const started = performance.now();
      const L = this.store.layerCount;
      this.trace?.({ kind: 'load-start', layer: L });
      const out = await this.store.readHead();
      this.trace?.({ kind: 'load-end', layer: L });
      this.stats.headLoads++;
      this.stats.ioMs += performance.now() - started;
      return out;
    });
  }
}
