import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chosenExperts, describeHfConfig, resolveHubConfig, Engine, generate, isSparseLayer, makeHubModel, parameterCounts, ReferenceBackend, type DecoderBackend, type LayerTensors, type TokenRoutes } from '@flexhelm/engine';
import { afterAll, describe, expect, it } from 'vitest';
import { planMemory } from './memory-plan.js';
import { layerObjects, modelShapeOfDescription } from './model-shape.js';
import { placeWeights } from './placement.js';
import { OffloadingBackend } from './offloading-backend.js';
import { parsePolicy, percentsFromArgs } from './policy.js';
import { WeightTierStore } from './weight-tier-store.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-moe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A small Mixtral: every layer sparse, 4 experts of 48, untied head.
const mixtral = describeHfConfig({ model_type: 'mixtral', vocab_size: 100, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48, num_local_experts: 4, max_position_embeddings: 64 });
const policy = (percent: number[], gpuBatchSize = 2, numGpuBatches = 1) => parsePolicy({ gpuBatchSize, numGpuBatches, ...percentsFromArgs(percent) });

/** Random values exact in f16 (the host and disk tiers keep f16 copies). */
function f16Exact(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    out[i] = ((s % 2001) - 1000) / 1024;
  }
  return out;
}

function layerOf(d: typeof mixtral, seed: number): LayerTensors {
  return Object.fromEntries(d.layerTensors.map((t, i) => [t.key, f16Exact(t.shape.reduce((a, b) => a * b, 1), seed + i)]));
}

describe('the expert as the unit of offloading: the weight tier store', () => {
  it('places each expert whole on one tier, so the weight percents count experts', () => {
    const store = new WeightTierStore(mixtral, policy([0, 50, 100, 0, 100, 0]), { diskBytesRead: 0, diskReadMs: 0 }, join(dir, 'placement'), false);
    const tiers = store.placement();
    for (let e = 0; e < 4; e++) {
      const of = ['gateW', 'upW', 'downW'].map((k) => tiers.get(`expert.${e}.${k}`));
      expect(new Set(of).size, `expert ${e}: ${of.join(', ')}`).toBe(1);
    }
    // 4 equal experts after the small router, half of the MLP object on disk: experts 0 and 1 on disk, 2 and 3 on host.
    expect([0, 1, 2, 3].map((e) => tiers.get(`expert.${e}.gateW`))).toEqual(['disk', 'disk', 'host', 'host']);
    store.close();
  });

  it('reads a sparse layer without its experts, and each expert alone, from their own byte ranges; both give the stored values back', async () => {
    const stats = { diskBytesRead: 0, diskReadMs: 0 };
    const store = new WeightTierStore(mixtral, policy([0, 0, 100, 0, 100, 0]), stats, join(dir, 'ranges'), false);
    try {
      const weights = layerOf(mixtral, 7);
      expect((await store.placeLayer(0, weights)).streamed).toBe(true);
      const fileBytes = mixtral.layerTensors.reduce((sum, t) => sum + Math.ceil((t.shape.reduce((a, b) => a * b, 1) * 2) / 4096) * 4096, 0);
      const expertKeys = mixtral.layerTensors.map((t) => t.key).filter((k) => k.startsWith('expert.'));
      const expertBytes = (e: number) => expertKeys.filter((k) => k.startsWith(`expert.${e}.`)).length * 4096;

      const dense = await store.readLayer(0, {}, false);
      expect(Object.keys(dense).sort()).toEqual(mixtral.layerTensors.map((t) => t.key).filter((k) => !k.startsWith('expert.')).sort());
      for (const [k, v] of Object.entries(dense)) expect(v, k).toEqual(weights[k]);
      const denseBytes = stats.diskBytesRead;
      expect(denseBytes).toBe(fileBytes - 4 * expertBytes(0));

      const one = await store.readExpert(0, 2);
      expect(Object.keys(one).sort()).toEqual(['expert.2.downW', 'expert.2.gateW', 'expert.2.upW']);
      for (const [k, v] of Object.entries(one)) expect(v, k).toEqual(weights[k]);
      expect(stats.diskBytesRead - denseBytes).toBe(expertBytes(2));
      expect(store.expertBytes(0, 2)).toBe(3 * 32 * 48 * 2);

      const whole = await store.readLayer(0);
      expect(Object.keys(whole).length).toBe(mixtral.layerTensors.length);
      for (const [k, v] of Object.entries(whole)) expect(v, k).toEqual(weights[k]);
    } finally {
      store.close();
    }
  });

  it('the memory plan places experts as the store does, and counts the staging slots experts are read into', () => {
    const p = policy([0, 50, 100, 0, 100, 0]);
    const store = new WeightTierStore(mixtral, p, { diskBytesRead: 0, diskReadMs: 0 }, join(dir, 'plan'), false);
    const shape = modelShapeOfDescription(mixtral);
    const byStore = [...store.placement()].filter(([k]) => mixtral.layerTensors.find((t) => t.key === k)!.group === 'mlp').map(([, tier]) => tier);
    const mlp = layerObjects(shape).find((o) => o.name === 'mlp_0')!;
    expect(placeWeights(mlp.tensors, p.wGpuPercent, p.wCpuPercent)).toEqual(byStore);
    store.close();
    // Experts 0 and 1 of each layer on disk (3 · 32 · 48 values in f16 each): the plan holds a slot of one per expert.
    expect(planMemory(shape, p, { promptLen: 8, genLen: 4 }).expertStaging).toBe(4 * 3 * 32 * 48 * 2);
    expect(planMemory(shape, policy([0, 100, 100, 0, 100, 0]), { promptLen: 8, genLen: 4 }).expertStaging).toBe(0);
  });

  it('Qwen1.5-MoE-A2.7B with every weight on disk (KV cache on host) fits --max-ram 8 for a backend that takes f16, not with float32 copies', () => {
    const d = describeHfConfig(resolveHubConfig('qwen1.5-moe-a2.7b').hf);
    const shape = modelShapeOfDescription(d);
    const p = policy([0, 0, 0, 100, 100, 0], 8);
    const workload = { promptLen: 512, genLen: 32 };
    const f16 = planMemory(shape, p, workload, { handOver: 'f16' });
    const fp32 = planMemory(shape, p, workload);
    expect(f16.ramBytes).toBeLessThan(8 * 1024 ** 3);
    expect(fp32.ramBytes).toBeGreaterThan(8 * 1024 ** 3);
    // The same tiers and slots; f16 drops the float32 copies of streamed layers (two, and onnxruntime's held one) for
    // the live layer's packed bf16 copy.
    const layerFp32 = d.layerTensors.reduce((a, t) => a + 4 * t.shape.reduce((x, y) => x * y, 1), 0);
    expect(fp32.workspace - f16.workspace).toBeGreaterThan(1.5 * layerFp32);
    expect(f16.expertStaging).toBe(60 * 3 * Math.ceil((2048 * 1408 * 2) / 4096) * 4096);
  });

  it("the memory plan sizes every expert: all weights on host in f16 are twice the model's total parameters", () => {
    const plan = planMemory(modelShapeOfDescription(mixtral), policy([0, 100, 100, 0, 100, 0]), { promptLen: 8, genLen: 4 });
    const { total, active } = parameterCounts(mixtral);
    expect(plan.weights.host).toBe(2 * total);
    // 2 of 4 experts a token: the experts are 3 · 32 · 48 values each, per layer.
    expect(total - active).toBe(2 * 2 * 3 * 32 * 48);
  });
});

// The Mixtral golden (transformers 4.47.1, every weight exact in f16) and a Qwen2-MoE of check.md's shape (a shared
// expert, dense layers 0 and 2 among sparse ones) made in f16.
const conformance = resolve(__dirname, '../../../../shared/conformance');
const mixtralGolden = join(conformance, 'families/mixtral-a/f32');
const qwenFolder = join(dir, 'qwen2-moe');
const models: [string, string][] = [...(existsSync(mixtralGolden) ? [['mixtral-a', mixtralGolden] as [string, string]] : []), ['qwen2-moe', qwenFolder]];

describe.each(models)('a mixture of experts offloaded with the expert as the unit (%s)', (_name, folder) => {
  // Prompts of 5+ tokens: their prefill is expected to choose more than 80% of the experts (whole layers stream); a
  // one-token decode step at most k of E (experts on demand).
  const requests = [
    { prompt: [5, 17, 250, 9, 33], maxNewTokens: 5, topLogprobs: 2, echoPrompt: true },
    { prompt: [400, 2, 71, 88, 3, 640], maxNewTokens: 4, topLogprobs: 2, echoPrompt: true },
  ];
  const run = async (backend: DecoderBackend, maxBatchSize = 1) => {
    if (!existsSync(qwenFolder)) {
      makeHubModel({
        config: { base: 'qwen1.5-moe-a2.7b', vocab_size: 1000, hidden_size: 32, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, decoder_sparse_step: 2, num_experts: 6, num_experts_per_tok: 2, moe_intermediate_size: 32, shared_expert_intermediate_size: 48, max_position_embeddings: 128 },
        outDir: qwenFolder,
        dtype: 'f16',
      });
    }
    const engine = await Engine.load(folder, { backend });
    try {
      return (await generate(engine, requests, { maxBatchSize })).map((r) => r.completions[0]!);
    } finally {
      await engine.close();
    }
  };
  const values = (cs: Awaited<ReturnType<typeof run>>) => cs.flatMap((c) => [...c.promptTokens!, ...c.tokens].flatMap((t) => [t.id, t.logprob ?? 0, ...t.top.map((x) => x.logprob)]));

  it('computes as the resident reference, and a decode step reads only the experts its router chose', async () => {
    const resident = await run(new ReferenceBackend());
    // Every weight on disk. Per sparse layer call: whether the layer came without its experts (a source instead),
    // and how many distinct experts its router chose.
    const withSource = new Map<number, boolean>();
    const routed: { tokens: number; experts: number; onDemand: boolean }[] = [];
    const inner = new ReferenceBackend({
      onRoutes: (layer: number, routes: TokenRoutes, step) => {
        routed.push({ tokens: step.batch * step.seq, experts: chosenExperts(routes).length, onDemand: withSource.get(layer)! });
      },
    });
    const setLayer = inner.streamedLayers.setLayer;
    inner.streamedLayers.setLayer = (index, weights, experts) => {
      withSource.set(index, experts !== undefined);
      if (experts) expect(Object.keys(weights).filter((k) => k.startsWith('expert.'))).toEqual([]);
      return setLayer(index, weights, experts);
    };
    const backend = new OffloadingBackend(inner, policy([0, 0, 100, 0, 100, 0]), { offloadDir: join(dir, `run-${_name}`), direct: false });
    const offloaded = await run(backend);
    expect(values(offloaded)).toEqual(values(resident));
    // Experts are read alone exactly for the calls that routed first, each chosen one once. Prefills (5+ tokens, most
    // experts chosen) read whole layers and one-token decode steps route first, except the first layer of a step, read
    // ahead during the step before under that step's setting (still computed right): once per request at most.
    const onDemand = routed.filter((r) => r.onDemand);
    expect(backend.stats.expertLoads).toBe(onDemand.reduce((a, r) => a + r.experts, 0));
    expect(routed.filter((r) => r.tokens > 1 && r.onDemand).length).toBeLessThanOrEqual(requests.length);
    expect(routed.filter((r) => r.tokens === 1 && !r.onDemand).length).toBeLessThanOrEqual(requests.length);
    expect(onDemand.length).toBeGreaterThan(0);

    // Layer by layer (every expert read with its layer): the same values, and no expert read alone.
    const wholeLayers = new OffloadingBackend(new ReferenceBackend(), policy([0, 0, 100, 0, 100, 0]), { offloadDir: join(dir, `whole-${_name}`), direct: false, experts: 'whole-layers' });
    expect(values(await run(wholeLayers))).toEqual(values(resident));
    expect(wholeLayers.stats.expertLoads).toBe(0);
    expect(wholeLayers.stats.diskBytesRead).toBeGreaterThan(backend.stats.diskBytesRead);
  });

  it('computes micro-batches of a batch as the resident reference, each expert read once per layer visit', async () => {
    const resident = await run(new ReferenceBackend(), 2);
    const offloaded = await run(new OffloadingBackend(new ReferenceBackend(), policy([0, 30, 100, 0, 100, 0], 1, 2), { offloadDir: join(dir, `mb-${_name}`), direct: false }), 2);
    expect(values(offloaded)).toEqual(values(resident));
  });
});

describe('routing statistics choose between whole layers and experts on demand', () => {
  it('expects E·(1 − (1 − k/E)^tokens) distinct experts before any step is measured', async () => {
    const backend = new OffloadingBackend(new ReferenceBackend(), policy([0, 50, 100, 0, 100, 0]), { offloadDir: join(dir, 'stats') });
    await backend.init(mixtral);
    expect(backend.expectedExperts(1)).toBe(2);
    expect(backend.expectedExperts(2)).toBe(3);
    expect(isSparseLayer(mixtral, 0)).toBe(true);
    await backend.dispose();
  });
});
