import type { ExpertSource, HeadWeights, StreamedHead, StreamedLayers, StreamedLayerTensors } from '@flexhelm/engine';
import type { IoClock } from './io-clock.js';
import type { WeightTierStore } from './weight-tier-store.js';

/** Counters the prefetcher adds to (the backend's stats). Times in milliseconds. */
export interface PrefetchStats {
  weightLoads: number;
  headLoads: number;
  ioMs: number;
  computeMs: number;
  stallMs: number;
  /** Experts read on their own (a sparse layer's, once its router chose them). */
  expertLoads: number;
}

/** A streamed layer's read: its tensors, and whether a sparse layer's experts are among them. */
interface LayerRead {
  weights: Promise<StreamedLayerTensors>;
  withExperts: boolean;
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
  private readonly inFlight = new Map<number, LayerRead>();
  /**
   * Read sparse layers without their experts and hand the backend an `ExpertSource` for the ones its router picks (a
   * decode step's few rows choose few experts); false: whole layers, as for prefill, where nearly all are chosen.
   * Set per step by the offloading backend; a read begun under the other setting is still computed right.
   */
  expertsOnDemand = false;
  /** The arrays the last sparse layer's expert source read: back to the store once the backend has the next layer. */
  private expertArrays: Promise<StreamedLayerTensors>[] = [];
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
    const read = pending ?? this.fetchLayer(index);
    const weights = await read.weights;
    this.stats.stallMs += performance.now() - waitStart;
    this.readAhead(index);
    const t0 = performance.now();
    try {
      await this.layers.setLayer(index, weights, read.withExperts ? undefined : this.expertSource(index));
    } catch (e) {
      // Not taken: the arrays go back (an f16 read's staging slot with them).
      this.store.recycle(Object.values(weights));
      throw e;
    }
    this.store.recycle(this.layers.reclaim());
    this.recycleExperts();
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
    this.recycleExperts();
    const layers = [...this.inFlight.keys()].map((j) => this.drop(j));
    await Promise.allSettled([...layers, this.headInFlight]);
    this.headInFlight = undefined;
  }

  /** Forgets layer `index`'s load; its arrays go back to the store when it ends (an f16 read frees its slot). */
  private drop(index: number): Promise<void> {
    const pending = this.inFlight.get(index);
    this.inFlight.delete(index);
    return (pending?.weights ?? Promise.resolve({})).then(
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

  private fetchLayer(index: number): LayerRead {
    const withExperts = !(this.expertsOnDemand && this.layers.routedExperts === true && this.store.hasExperts(index));
    const weights = this.clock.track(async () => {
      const started = performance.now();
      this.trace?.({ kind: 'load-start', layer: index });
      // A backend that reads f16 (4-bit) weights gets the stored f16 (4-bit) copies as they are (no widening pass).
      const out = await this.store.readLayer(index, { f16: this.layers.acceptsF16 === true, group4: this.layers.acceptsGroup4 === true }, withExperts);
      this.trace?.({ kind: 'load-end', layer: index });
      this.stats.weightLoads++;
      this.stats.ioMs += performance.now() - started;
      return out;
    });
    return { weights, withExperts };
  }

  /**
   * The experts of sparse layer `index` for this visit of it: each read once when the router first asks for it (every
   * micro-batch of the visit shares the reads), all asked at once read in parallel.
   */
  private expertSource(index: number): ExpertSource {
    const reads = new Map<number, Promise<StreamedLayerTensors>>();
    // A backend that reads f16 gets views of the staging slots (no widening, no fresh memory): they go back to the
    // store once the backend holds the next layer (`recycleExperts`); the store has a slot for every expert.
    const f16 = this.layers.acceptsF16 === true;
    return {
      read: (layer, ids) => {
        if (layer !== index) throw new Error(`offload: layer ${layer} asked for experts through layer ${index}'s source`);
        const out = ids.map((e) => {
          let read = reads.get(e);
          if (!read) {
            read = this.clock.track(async () => {
              const started = performance.now();
              const out = await this.store.readExpert(index, e, { f16 });
              this.stats.expertLoads++;
              this.stats.ioMs += performance.now() - started;
              return out;
            });
            reads.set(e, read);
            this.expertArrays.push(read);
          }
          return read;
        });
        this.onExpertsAsked?.(index, reads.size);
        return out;
      },
    };
  }

  /** Gives the last expert source's arrays back to the store (the backend replaced that layer: nothing reads them). */
  private recycleExperts(): void {
    const reads = this.expertArrays;
    this.expertArrays = [];
    for (const read of reads) {
      read.then(
        (w) => this.store.recycle(Object.values(w)),
        () => undefined,
      );
    }
  }

  /** Called with the distinct experts a visit of a sparse layer has asked for so far (routing statistics). */
  onExpertsAsked?: (layer: number, experts: number) => void;

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
