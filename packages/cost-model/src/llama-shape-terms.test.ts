import { describeHfConfig, llamaDescriptionFromHf } from '@flexhelm/engine';
import { modelShapeOfDescription, parsePolicy, percentsFromArgs, planMemory, type ModelShape } from '@flexhelm/offload/plan';
import { describe, expect, it } from 'vitest';
import { calibrationLayers } from './calibration-policies.js';
import { shapeId } from './machine-profile.js';
import { microBatchBytes } from './micro-batch-bytes.js';
import { heldDecodeShare } from './held-decode-share.js';
import { backendProfile, embeddingPlacement, headPlacement, layerPlacement, peakRssTerms, predictCost, predictPeakRss, shapeKeyOf, stackActivationBytes, stepCost } from './predict-cost.js';
import { searchPolicy } from './search-policy.js';
import { testProfile } from './test-profile.js';

// Llama 3.1 8B's config.json: GQA 32/8, SwiGLU 14336, untied head.
const hf = { model_type: 'llama', hidden_size: 4096, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 14336, vocab_size: 128256, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: false };
const d = llamaDescriptionFromHf(hf);
const llama8b = modelShapeOfDescription(d);
const policy = (pct: number[], extra = {}) => parsePolicy({ gpuBatchSize: 4, numGpuBatches: 1, ...percentsFromArgs(pct), ...extra });

describe('cost-model shape terms for the Llama family', () => {
  it("prices a streamed layer by the description's tensors: q and o full width, k and v by the KV heads, gate/up/down", () => {
    const p = layerPlacement(llama8b, policy([0, 100, 100, 0, 100, 0]));
    const described = d.layerTensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
    expect(p.hostElements).toBe(described);
    expect(described).toBe(2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096);
    expect(p.hostBytes).toBe(2 * described);
    // All on disk: one file, each tensor at a 4 KiB boundary.
    const disk = layerPlacement(llama8b, policy([0, 0, 100, 0, 100, 0]));
    expect(disk.diskElements).toBe(described);
    expect(disk.diskBytes).toBe(d.layerTensors.reduce((a, t) => a + Math.ceil((2 * t.shape.reduce((x, y) => x * y, 1)) / 4096) * 4096, 0));
  });

  it('every weight on disk: loading counts three layers in fp32, not twelve, so --max-ram 8 admits what ran in 6.06 GiB', () => {
    // The HELM run of RESULTS.md (dyck, 2 requests of ~165 tokens, 5 new): measured peak RSS 6.06 GiB; refused before at 13.77 GiB.
    const disk = parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, ...percentsFromArgs([0, 0, 100, 0, 100, 0]) });
    const workload = { promptLen: 165, genLen: 5 };
    const plan = planMemory(llama8b, disk, workload);
    const base = 0.4 * 2 ** 30;
    const terms = peakRssTerms(llama8b, disk, plan, base, workload);
    const layerFp32 = 4 * layerPlacement(llama8b, disk).diskElements;
    // Embedding table and untied head as fp32 (2 × 128256 × 4096 + the final norm), three layers' fp32 in flight.
    expect(terms.loading).toBe(4 * (2 * 128256 * 4096 + 4096) + 3 * layerFp32);
    const peak = predictPeakRss(llama8b, disk, plan, base, undefined, workload) / 2 ** 30;
    expect(peak).toBeGreaterThan(6.06);
    // --max-ram 8 plans within 90% of the budget.
    expect(peak).toBeLessThan(0.9 * 8);
  });

  it('copies K/V micro-batch rows of kvHeads × headDim (a quarter of hidden for 8 of 32 heads)', () => {
    const full = microBatchBytes(2, 99, 4096);
    const gqa = microBatchBytes(2, 99, 4096, 1024);
    // mask 2·100, hidden 2·2·4096, past 2·2·99·kv, present 2·2·100·kv (float32)
    expect(gqa).toBe(4 * (200 + 4 * 4096 + 4 * 99 * 1024 + 4 * 100 * 1024));
    expect(full - gqa).toBe(4 * (4 * 99 + 4 * 100) * 3072);
  });

  it('reads the timings of its own family layer, not those of an OPT shape of the same widths', () => {
    const opt: ModelShape = { numLayers: 32, hiddenSize: 4096, ffnDim: 14336, numHeads: 32, vocabSize: 128256, maxPositions: 2048 };
    expect(shapeId(shapeKeyOf(opt))).toBe('h4096-f14336-n32-v128256');
    expect(shapeId(shapeKeyOf(llama8b))).toBe('h4096-f14336-n32-v128256-kv8x128-swiglu-rms');
    expect(() => backendProfile(testProfile(), llama8b, 'onnxruntime-fp32')).toThrow(/no onnxruntime-fp32 figures for this model's shapes \(h4096-f14336-n32-v128256-kv8x128-swiglu-rms\)/);
  });

  it('sizes calibration and activation terms by the family: three MLP matrices, GQA k/v', () => {
    // An 8B layer is 0.87 GB in fp32 (over 200 MB): four calibration layers.
    expect(calibrationLayers(llama8b)).toBe(4);
    const stack = stackActivationBytes(llama8b, 1, 16);
    // 16 tokens, one chunk: MLP gate+up, 8 hidden-wide, scores; q, o, k, v
    expect(stack).toBe(4 * 32 * (16 * (2 * 14336 + 8 * 4096 + 32 * 16) + 16 * (2 * 4096 + 2 * 1024)));
  });

  it("--percent auto's search picks a policy for a Llama shape that fits the budget", () => {
    // The test profile's layer timings at a tiny Llama shape (hidden 64, GQA 4/2, SwiGLU 256).
    const tiny = modelShapeOfDescription(llamaDescriptionFromHf({ ...hf, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 256, vocab_size: 100, max_position_embeddings: 62 }));
    const profile = testProfile();
    const [opt] = Object.values(profile.shapes);
    profile.shapes[shapeId(shapeKeyOf(tiny))] = { shape: shapeKeyOf(tiny), backends: opt!.backends };
    const workload = { promptLen: 8, genLen: 4, numSequences: 16 };
    const r = searchPolicy(tiny, workload, profile, { maxRam: 2 ** 34, freeDisk: 2 ** 40 });
    expect(r.best.throughput).toBeGreaterThan(0);
    // The plan it was judged by counts the GQA cache: 2 · 2 KV heads · 16 · 2 layers per token in f32 on the compute tier,
    // for the 8 + 64 tokens of room an in-place cache makes for the prompt (the 8 + 4 − 1 cached fit in it).
    const p = r.best.policy;
    const rows = p.gpuBatchSize * p.numGpuBatches;
    expect(predictCost(tiny, p, workload, profile).memory.cache.compute).toBe(rows * (8 + 64) * 2 * 2 * 16 * 2 * 4);
  });
});

describe('cost-model terms for a GGUF file held as blocks (ModelShape.family.held)', () => {
  // Llama 3.1 8B as Q4_0: 18 bytes per 32 weights for every matrix, the token table and the head.
  const q40 = (elements: number) => (elements / 32) * 18;
  const held: Record<string, number> = { 'embed_tokens.weight': q40(128256 * 4096), 'lm_head.weight': q40(128256 * 4096) };
  for (let i = 0; i < 32; i++) for (const t of llama8b.family!.layerTensors.filter((x) => x.shape.length === 2)) held[`layers.${i}.${t.name}`] = q40(t.shape[0]! * t.shape[1]!);
  const blocks: ModelShape = { ...llama8b, family: { ...llama8b.family!, held } };
  const workload = { promptLen: 256, genLen: 8 };

  it('predicts the peak of an all-resident run from the blocks: no float32 layers nor their garbage', () => {
    const resident = policy([100, 0, 100, 0, 100, 0]);
    const plan = planMemory(blocks, resident, workload);
    const t = peakRssTerms(blocks, resident, plan, 0, workload);
    expect(t.resident).toBe(plan.weights.compute + plan.head);
    expect(t.loading).toBe(plan.loading - plan.runtime);
    // 4.3 GB of blocks (and float32 norms) against 32 GB of float32 weights and twelve layers' garbage.
    expect(predictPeakRss(blocks, resident, plan, 0, undefined, workload)).toBeLessThan(8 * 2 ** 30);
    expect(predictPeakRss(llama8b, resident, planMemory(llama8b, resident, workload), 0, undefined, workload)).toBeGreaterThan(30 * 2 ** 30);
  });

  it('a streamed policy keeps the blocks on its tiers: their bytes, read where they lie; the token table and head resident', () => {
    const matrices = llama8b.family!.layerTensors.filter((x) => x.shape.length === 2).reduce((a, t) => a + q40(t.shape[0]! * t.shape[1]!), 0);
    const host = layerPlacement(blocks, policy([0, 100, 100, 0, 100, 0]));
    // The layer's matrices as blocks and its two norms in f16; only the norms are converted per load.
    expect(host.hostBytes).toBe(matrices + 2 * 4096 * 2);
    expect(host.hostElements).toBe(2 * 4096);
    expect(host.freshBytes).toBe(0);
    const disk = layerPlacement(blocks, policy([0, 0, 100, 0, 100, 0]));
    expect(disk.diskBytes).toBeLessThan(layerPlacement(llama8b, policy([0, 0, 100, 0, 100, 0])).diskBytes / 3.4);
    expect(headPlacement(blocks, policy([0, 0, 100, 0, 100, 0])).computeBytes).toBe(q40(128256 * 4096));
    expect(embeddingPlacement(blocks, policy([0, 0, 100, 0, 100, 0])).computeBytes).toBe(q40(128256 * 4096));
    // Less memory predicted than the widened run's (no float32 copies in flight, the tables as blocks).
    const streamed = policy([0, 100, 100, 0, 100, 0]);
    expect(predictPeakRss(blocks, streamed, planMemory(blocks, streamed, workload), 0, undefined, workload)).toBeLessThan(predictPeakRss(llama8b, streamed, planMemory(llama8b, streamed, workload), 0, undefined, workload) / 2);
  });
});

describe('decode steps over a GGUF file\'s blocks (heldDecodeShare)', () => {
  // A tiny Llama shape with the test profile's timings; its matrices and head as Q4_0 blocks.
  const tiny = modelShapeOfDescription(llamaDescriptionFromHf({ ...hf, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 256, vocab_size: 100, max_position_embeddings: 62 }));
  const q40 = (elements: number) => (elements / 32) * 18;
  const held: Record<string, number> = { 'embed_tokens.weight': 0, 'lm_head.weight': q40(100 * 64) };
  for (let i = 0; i < 2; i++) for (const t of tiny.family!.layerTensors.filter((x) => x.shape.length === 2)) held[`layers.${i}.${t.name}`] = q40(t.shape[0]! * t.shape[1]!);
  const blocks: ModelShape = { ...tiny, family: { ...tiny.family!, held } };
  const profile = testProfile();
  const [opt] = Object.values(profile.shapes);
  profile.shapes[shapeId(shapeKeyOf(tiny))] = { shape: shapeKeyOf(tiny), backends: opt!.backends };

  it('reads the blocks\' bytes instead of the probe\'s 16-bit weights: a decode step scales by that share, a prompt step does not', () => {
    const share = heldDecodeShare(blocks);
    const matrices = 64 * (64 + 2 * 32) + 64 * 64 + 3 * 64 * 256;
    // 0.5625 bytes a weight against 2, the two norms as they were.
    expect(share.layer).toBeCloseTo((q40(matrices) + 2 * 2 * 64) / (2 * (matrices + 2 * 64)), 12);
    expect(share.head).toBeCloseTo(18 / 32 / 2, 12);
    expect(heldDecodeShare(tiny)).toEqual({ layer: 1, head: 1 });
    for (const percents of [[100, 0, 100, 0, 100, 0], [0, 100, 100, 0, 100, 0]]) {
      const p = policy(percents);
      const plain = stepCost(tiny, p, profile, 1, 8);
      const held = stepCost(blocks, p, profile, 1, 8);
      expect(held.residentLayerMs).toBeCloseTo(share.layer * plain.residentLayerMs, 9);
      expect(held.headMs).toBeLessThan(plain.headMs);
      expect(held.ms).toBeLessThan(plain.ms);
      expect(stepCost(blocks, p, profile, 8, 0).ms).toBeCloseTo(stepCost(tiny, p, profile, 8, 0).ms, 9);
    }
  });
});

describe('cost-model terms for Gemma 2 (2B sizes, through its config parser)', () => {
  // Gemma-2-2B's config.json: 8 heads × 256 with hidden 2304, 4 KV heads, GeGLU 9216, tied 256000-row head.
  const gemma = describeHfConfig({
    model_type: 'gemma2', hidden_size: 2304, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, intermediate_size: 9216,
    vocab_size: 256000, max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000, query_pre_attn_scalar: 256, sliding_window: 4096,
    attn_logit_softcapping: 50, final_logit_softcapping: 30, hidden_activation: 'gelu_pytorch_tanh', bos_token_id: 2, eos_token_id: 1, pad_token_id: 0,
  });
  const shape = modelShapeOfDescription(gemma);

  it("prices its layer by the description's tensors: q/o at 8 × 256, k/v at 4 × 256, three GeGLU matrices, four norms", () => {
    const p = layerPlacement(shape, policy([0, 100, 100, 0, 100, 0]));
    expect(p.hostElements).toBe(2 * 2304 * 2048 + 2 * 2304 * 1024 + 3 * 2304 * 9216 + 4 * 2304);
    // Gate and up both held: the activation stack counts two intermediates, q and the output at 2048 wide.
    expect(stackActivationBytes(shape, 1, 16)).toBe(4 * 26 * (16 * (2 * 9216 + 8 * 2304 + 8 * 16) + 16 * (2 * 2048 + 2 * 1024)));
  });

  it("is keyed by its own layer's kinds: a Llama layer's timings of the same widths are not used for it", () => {
    const llamaLike = modelShapeOfDescription(llamaDescriptionFromHf({ model_type: 'llama', hidden_size: 2304, head_dim: 256, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4, intermediate_size: 9216, vocab_size: 256000, max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: true }));
    const id = shapeId(shapeKeyOf(shape));
    expect(id.startsWith(`${shapeId(shapeKeyOf(llamaLike))}-`)).toBe(true);
    expect(id).toContain('norm.rmsnorm-plus-one');
    const profile = testProfile();
    const [opt] = Object.values(profile.shapes);
    profile.shapes[shapeId(shapeKeyOf(llamaLike))] = { shape: shapeKeyOf(llamaLike), backends: opt!.backends };
    expect(() => backendProfile(profile, shape, 'onnxruntime-fp32')).toThrow(`no onnxruntime-fp32 figures for this model's shapes (${id})`);
  });

  it("--percent auto's search under --max-ram 8 picks a policy whose plan and predicted peak fit (the fp32 weights alone are 10.5 GB)", () => {
    const profile = testProfile();
    const [opt] = Object.values(profile.shapes);
    profile.shapes[shapeId(shapeKeyOf(shape))] = { shape: shapeKeyOf(shape), backends: opt!.backends };
    const budget = { maxRam: 8 * 2 ** 30, freeDisk: 2 ** 40 };
    const workload = { promptLen: 512, genLen: 32, numSequences: 64 };
    const r = searchPolicy(shape, workload, profile, budget, { planFits: true });
    const plan = planMemory(shape, r.best.policy, workload);
    expect(plan.ramBytes).toBeLessThanOrEqual(budget.maxRam);
    expect(r.best.prediction.peakRssBytes).toBeLessThanOrEqual(budget.maxRam);
    expect(r.best.policy.wGpuPercent).toBeLessThan(100);
  });
});
