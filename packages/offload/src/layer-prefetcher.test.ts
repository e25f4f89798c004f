import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModelDescription, type LayerTensors, type ModelDescription, type StreamedLayers, type StreamedLayerTensors, type StreamedTensor } from '@flexhelm/engine';
import { f32ToF16 } from '@flexhelm/pinned-memory';
import { afterAll, describe, expect, it } from 'vitest';
import { IoClock } from './io-clock.js';
import { LayerPrefetcher, type LoadEvent, type PrefetchStats } from './layer-prefetcher.js';
import { parsePolicy, percentsFromArgs } from './policy.js';
import { WeightTierStore } from './weight-tier-store.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-prefetch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const model: ModelDescription = makeModelDescription({ name: 'tiny-prefetch', hiddenSize: 64, numHiddenLayers: 4, numAttentionHeads: 4, ffnDim: 128, vocabSize: 50, maxPositionEmbeddings: 32 });

/** Layer `index`'s tensors: every value different, and different per layer. */
function layerWeights(index: number): LayerTensors {
  const out: LayerTensors = {};
  for (const { key, shape } of model.layerTensors) {
    const n = shape.reduce((a, b) => a * b, 1);
    out[key] = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + index * 1.7 + key.length) * 0.1);
  }
  return out;
}

/**
 * A backend's side of `StreamedLayers` that reads f16 (as the oneDNN backend does) and checks what it holds: the live
 * layer's arrays must keep the values handed over until the layer is replaced and its arrays reclaimed.
 */
class CheckingLayers implements StreamedLayers {
  readonly acceptsF16 = true;
  live?: { index: number; arrays: StreamedLayerTensors; copies: Map<string, Float32Array | Uint16Array> };
  private given: StreamedTensor[] = [];
  readonly changed: string[] = [];
  readonly handedOver: StreamedLayerTensors[] = [];
  async loadLayer(): Promise<void> {}
  async setLayer(index: number, weights: StreamedLayerTensors): Promise<void> {
    this.check();
    if (this.live) this.given.push(...(Object.values(this.live.arrays) as StreamedTensor[]));
    this.live = { index, arrays: weights, copies: new Map(Object.entries(weights).map(([k, a]) => [k, (a as Float32Array | Uint16Array).slice()])) };
    this.handedOver.push(weights);
  }
  reclaim(): StreamedTensor[] {
    const g = this.given;
    this.given = [];
    return g;
  }
  /** Records every live array whose values changed since it was handed over. */
  check(): void {
    if (!this.live) return;
    for (const [key, copy] of this.live.copies) {
      const a = this.live.arrays[key] as Float32Array | Uint16Array;
      if (a.some((v, i) => v !== copy[i])) this.changed.push(`layer ${this.live.index} ${key}`);
    }
  }
}

async function placed(percents: number[], name: string) {
  const policy = parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, ...percentsFromArgs(percents) });
  const stats = { diskBytesRead: 0, diskReadMs: 0 };
  const store = new WeightTierStore(model, policy, stats, join(dir, name), false);
  for (let i = 0; i < model.layers; i++) await store.placeLayer(i, layerWeights(i));
  store.endLoading();
  const layers = new CheckingLayers();
  const events: LoadEvent[] = [];
  const waiters: { layer: number; resolve: () => void }[] = [];
  const trace = (e: LoadEvent) => {
    events.push(e);
    if (e.kind === 'load-end') for (const w of waiters.filter((x) => x.layer === e.layer)) w.resolve();
  };
  const prefetchStats: PrefetchStats = { weightLoads: 0, headLoads: 0, expertLoads: 0, ioMs: 0, computeMs: 0, stallMs: 0 };
  const prefetcher = new LayerPrefetcher(store, layers, undefined, prefetchStats, new IoClock(() => undefined), trace);
  /** Resolves when the next load of `layer` ends. */
  const loaded = (layer: number) => new Promise<void>((resolve) => waiters.push({ layer, resolve }));
  return { store, layers, prefetcher, loaded, events };
}

const f16Of = async (a: Float32Array) => f32ToF16(a, new Uint16Array(a.length));

describe('f16 hand-over of streamed layers', () => {
  it('disk tier: each layer gets its f16 bytes in a staging slot, and no slot is reused while its layer is live', async () => {
    // Weights all on disk: every streamed matrix comes from a staging slot, two of which exist.
    const { layers, prefetcher, loaded } = await placed([0, 0, 100, 0, 100, 0], 'disk');
    const expected = await Promise.all(Array.from({ length: model.layers }, async (_, i) => layerWeights(i)));
    for (let step = 0; step < 3; step++) {
      prefetcher.startStep();
      for (let i = 0; i < model.layers; i++) {
        const next = loaded((i + 1) % model.layers);
        await prefetcher.beforeLayer(i);
        // While layer i "computes", the next layer is read ahead: it must land in the other slot.
        await next;
        layers.check();
        const live = layers.live!;
        expect(live.index).toBe(i);
        for (const { key, shape } of model.layerTensors) {
          const a = live.arrays[key]!;
          if (shape.length >= 2) {
            expect(a).toBeInstanceOf(Uint16Array);
            expect(Array.from(a as Uint16Array)).toEqual(Array.from(await f16Of(expected[i]![key]!)));
          } else expect(a).toBeInstanceOf(Float32Array);
        }
      }
    }
    expect(layers.changed).toEqual([]);
    await prefetcher.settle();
  });

  it('host tier: the pinned f16 copies themselves are lent (the same arrays every step) and never recycled as fp32', async () => {
    const { layers, prefetcher, store } = await placed([0, 100, 100, 0, 100, 0], 'host');
    for (let step = 0; step < 2; step++) {
      prefetcher.startStep();
      for (let i = 0; i < model.layers; i++) await prefetcher.beforeLayer(i);
    }
    const [first, , , , again] = layers.handedOver;
    expect(first!.fc1W).toBeInstanceOf(Uint16Array);
    expect(again!.fc1W).toBe(first!.fc1W);
    expect(Array.from(first!.fc1W as Uint16Array)).toEqual(Array.from(await f16Of(layerWeights(0).fc1W!)));
    // A host copy given back stays the tensor's home: nothing of it reaches the fp32 recycler.
    store.recycle([first!.fc1W!]);
    expect(Array.from(again!.fc1W as Uint16Array)).toEqual(Array.from(await f16Of(layerWeights(0).fc1W!)));
    expect(layers.changed).toEqual([]);
    await prefetcher.settle();
  });

  it('a step left unfinished does not leave the next one waiting for a staging slot', async () => {
    const { prefetcher, layers } = await placed([0, 0, 100, 0, 100, 0], 'abandoned');
    prefetcher.startStep();
    await prefetcher.beforeLayer(0);
    await prefetcher.beforeLayer(1);
    // Layer 1 is live (one slot) and layer 2 is read ahead (the other): a new step starts at layer 0.
    prefetcher.startStep();
    await prefetcher.beforeLayer(0);
    expect(layers.live!.index).toBe(0);
    expect(Array.from(layers.live!.arrays.qW as Uint16Array)).toEqual(Array.from(await f16Of(layerWeights(0).qW!)));
    await prefetcher.settle();
  }, 20_000);
});
