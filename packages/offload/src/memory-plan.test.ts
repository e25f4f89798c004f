import { describe, expect, it } from 'vitest';
import { BudgetError, checkBudget, hostStreamingBytes, planMemory, STREAMED_LAYER_RUNTIME_BYTES, storageBytes } from './memory-plan.js';
import { llamaDescriptionFromHf, type ModelDescription } from '@flexhelm/engine';
import { grownKvCapacity } from './kv-capacity.js';
import { layerObjects, modelShapeOfDescription, type ModelShape } from './model-shape.js';
import { parsePolicy, percentsFromArgs, WEIGHT_COMPRESSION } from './policy.js';

const opt13b: ModelShape = { numLayers: 24, hiddenSize: 2048, ffnDim: 8192, numHeads: 32, vocabSize: 50272, maxPositions: 2048 };
const workload = { promptLen: 512, genLen: 32 };
const policy = (pct: number[], extra = {}) => parsePolicy({ gpuBatchSize: 8, numGpuBatches: 2, ...percentsFromArgs(pct), ...extra });

describe('storageBytes', () => {
  it('is fp16 for plain tensors and 4.5 bits per value for 4-bit groups', () => {
    expect(storageBytes([128, 64], undefined)).toBe(128 * 64 * 2);
    expect(storageBytes([128], WEIGHT_COMPRESSION)).toBe(256);
    // 64 values per group: 32 bytes of codes + 4 bytes of scale/min = 36 bytes (28.1% of fp16)
    expect(storageBytes([128, 64], WEIGHT_COMPRESSION)).toBe(2 * 64 * 36);
    // rows padded up to whole groups
    expect(storageBytes([100, 1], WEIGHT_COMPRESSION)).toBe(2 * 36);
  });

  it('refuses a group dimension the tensor does not have (it used to plan NaN bytes)', () => {
    expect(() => storageBytes([128, 64], { ...WEIGHT_COMPRESSION, groupDim: 2 })).toThrow('compression groupDim 2 is outside a tensor of 2 dimensions (shape [128, 64])');
  });
});

describe('planMemory', () => {
  it('moves weight bytes between tiers without losing any', () => {
    const ram = planMemory(opt13b, policy([0, 100, 100, 0, 100, 0]), workload);
    const disk = planMemory(opt13b, policy([0, 0, 100, 0, 100, 0]), workload);
    expect(ram.weights.disk).toBe(0);
    expect(disk.weights.host).toBe(0);
    expect(disk.weights.disk).toBe(ram.weights.host);
    // about 1.3B parameters in fp16, plus the output head's own copy of the token table (0.1B)
    expect(ram.weights.host / 2).toBeGreaterThan(1.35e9);
    expect(ram.weights.host / 2).toBeLessThan(1.5e9);
    expect(ram.head).toBe(0);
    expect(disk.head).toBe(0);
    expect(disk.ramBytes).toBeLessThan(ram.ramBytes);
  });

  it('compression shrinks stored weights to about 28% of fp16', () => {
    const plain = planMemory(opt13b, policy([0, 100, 100, 0, 100, 0]), workload);
    const comp = planMemory(opt13b, policy([0, 100, 100, 0, 100, 0], { compressWeight: true }), workload);
    // The input embedding stays f16 (its rows are gathered, FlexLLMGen would compress it along the vocab too); the
    // output head's table is compressed like a layer's matrices.
    const embedding = (50272 + 2050) * 2048 * 2;
    const ratio = (comp.weights.host - embedding) / (plain.weights.host - embedding);
    expect(ratio).toBeGreaterThan(0.28);
    expect(ratio).toBeLessThan(0.3);
  });

  it('counts the KV cache of every sequence of the block', () => {
    const p = planMemory(opt13b, policy([100, 0, 0, 100, 100, 0]), workload);
    expect(p.cache.host).toBe(16 * 2 * 543 * 2048 * 24 * 2);
    const disk = planMemory(opt13b, policy([100, 0, 0, 0, 100, 0]), workload);
    expect(disk.cache.disk).toBe(p.cache.host);
    expect(disk.diskBytes).toBe(p.cache.host);
    expect(disk.ramBytes).toBe(p.ramBytes - p.cache.host);
    // 4-bit groups of 64 along head_dim: 36 bytes per 64 values on every tier, the compute tier too
    const q4 = planMemory(opt13b, policy([100, 0, 100, 0, 100, 0], { compressCache: true }), workload);
    expect(q4.cache.compute).toBe((16 * 2 * 543 * 2048 * 24 * 36) / 64);
  });

  it("counts the compute-tier cache at the capacity an in-place cache grows to (headroom), not just what it holds", () => {
    // 512 + 32 − 1 = 543 tokens fit the prompt's capacity 512 + 128 = 640.
    const p = planMemory(opt13b, policy([100, 0, 100, 0, 100, 0]), workload);
    expect(p.cache.compute).toBe(16 * 2 * 640 * 2048 * 24 * 4);
    // 8 + 100 − 1 = 107 tokens outgrow the prompt's 8 + 64 = 72: one growth at 73 tokens, to 73 + 64.
    expect(grownKvCapacity(8, 107)).toBe(137);
    expect(planMemory(opt13b, policy([100, 0, 100, 0, 100, 0]), { promptLen: 8, genLen: 100 }).cache.compute).toBe(16 * 2 * 137 * 2048 * 24 * 4);
  });

  it('puts the output head on its tiers by the midpoint rule (OutputEmbed [ln_w, ln_b, tok])', () => {
    const resident = planMemory(opt13b, policy([100, 0, 0, 100, 100, 0]), workload);
    expect(resident.head).toBe(50272 * 2048 * 4 + 2 * 2048 * 4);
    // 0 50: the layer norm's midpoints are near 0% → disk, the table's just above 50% → host
    const split = planMemory(opt13b, policy([0, 50, 0, 100, 100, 0]), workload);
    const allDisk = planMemory(opt13b, policy([0, 0, 0, 100, 100, 0]), workload);
    expect(split.head).toBe(0);
    expect(allDisk.weights.disk - split.weights.disk).toBeGreaterThanOrEqual(50272 * 2048 * 2);
    // The streamed head (fp32, 412 MB) is larger than a layer (201 MB): the workspace holds a layer and the head.
    const layerFp32 = (12 * 2048 * 2048 + 13 * 2048) * 4;
    expect(allDisk.workspace - split.workspace).toBeGreaterThan(0);
    expect(allDisk.workspace).toBeGreaterThanOrEqual(layerFp32 + 50272 * 2048 * 4 + 2 * 2048 * 4);
  });

  it('counts what onnxruntime keeps for streamed layers only when layers stream', () => {
    const resident = planMemory(opt13b, policy([100, 0, 100, 0, 100, 0]), workload);
    const host = planMemory(opt13b, policy([0, 100, 100, 0, 100, 0]), workload);
    const layerFp32 = (12 * 2048 * 2048 + 13 * 2048) * 4;
    const headFp32 = 50272 * 2048 * 4 + 2 * 2048 * 4;
    // streamed: a layer and the head in flight, the previous layer not yet collected, the fused q/k/v copy; from the
    // host tier also each streamed layer's onnxruntime overhead (24 × 12 MiB) and the recycled layer
    expect(host.workspace - resident.workspace).toBe(layerFp32 + headFp32 + layerFp32 + 3 * 2048 * 2048 * 4 + 24 * STREAMED_LAYER_RUNTIME_BYTES + layerFp32);
  });

  it('counts the host-tier streaming overhead for host-only streaming, not when layers stream from disk', () => {
    const host = planMemory(opt13b, policy([0, 100, 100, 0, 100, 0]), workload);
    const disk = planMemory(opt13b, policy([0, 0, 100, 0, 100, 0]), workload);
    const layerFp32 = (12 * 2048 * 2048 + 13 * 2048) * 4;
    const diskFile = (12 * 2048 * 2048 + 13 * 2048) * 2;
    const headFile = 50272 * 2048 * 2 + 2 * 2048 * 2;
    // The disk plan has the two staging slots (sized for the head's file, the largest) instead.
    expect(host.workspace - (disk.workspace - 2 * Math.max(diskFile, headFile))).toBe(hostStreamingBytes(24, layerFp32));
    expect(hostStreamingBytes(24, layerFp32)).toBe(24 * 12 * 1024 ** 2 + layerFp32);
    expect(hostStreamingBytes(0, 0)).toBe(0);
  });

  it('counts the output head, the runtime and the loading peak', () => {
    const p = planMemory(opt13b, policy([100, 0, 0, 100, 100, 0]), workload);
    expect(p.loading).toBeGreaterThan(3 * 50272 * 2048 * 4);
    expect(p.ramBytes).toBe(Math.max(p.loading, p.runtime + p.weights.compute + p.weights.host + p.cache.compute + p.cache.host + p.activations.compute + p.workspace + p.head));
  });
});

describe('checkBudget', () => {
  it('refuses a plan over budget with the numbers and a policy that fits', () => {
    const p = policy([100, 0, 100, 0, 100, 0]);
    const need = planMemory(opt13b, p, workload).ramBytes;
    try {
      checkBudget(opt13b, p, workload, { maxRam: need / 2 });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(BudgetError);
      const e = err as BudgetError;
      expect(e.message).toMatch(/needs [\d.]+ GiB of RAM but the budget is [\d.]+ GiB/);
      expect(e.suggestion).toBeDefined();
      expect(e.message).toContain('--percent');
      expect(planMemory(opt13b, e.suggestion!, workload).ramBytes).toBeLessThanOrEqual(need / 2);
    }
  });

  it('says when nothing fits', () => {
    expect(() => checkBudget(opt13b, policy([100, 0, 100, 0, 100, 0]), workload, { maxRam: 1e6 })).toThrow(/no policy fits/);
  });
});

describe('planMemory for the Llama family', () => {
  // Llama 3.2 1B's config.json (tied head, GQA 32/8) and the same model with one KV head per query head.
  const hf = { model_type: 'llama', hidden_size: 2048, num_hidden_layers: 16, num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 8192, vocab_size: 128256, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: true };
  const gqa = modelShapeOfDescription(llamaDescriptionFromHf(hf));
  const mha = modelShapeOfDescription(llamaDescriptionFromHf({ ...hf, num_key_value_heads: 32 }));
  const cached = policy([100, 0, 0, 100, 100, 0]);

  it('sizes the KV cache by kvHeads × headDim: grouped-query attention with 8 of 32 heads holds a quarter', () => {
    const perSeq = (workload.promptLen + workload.genLen - 1) * 2 * 8 * 64 * 16; // K and V of 8 heads of 64, 16 layers
    expect(planMemory(gqa, cached, workload).cache.host).toBe(16 * perSeq * 2); // 16 sequences, f16
    expect(planMemory(mha, cached, workload).cache.host).toBe(4 * planMemory(gqa, cached, workload).cache.host);
  });

  it("counts the description's tensors: k/v of the KV heads, gate/up/down, no biases, no position table, a head of its own", () => {
    const layer = 2048 * 2048 * 2 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048; // q, o; k, v; gate, up, down; two norms
    const host = planMemory(gqa, policy([0, 100, 100, 0, 100, 0]), workload).weights.host;
    // f16: the layers, the token table (no positions) and the head's own table and norm.
    expect(host).toBe((16 * layer + 128256 * 2048 + 2048 + 128256 * 2048) * 2);
    expect(planMemory(mha, policy([0, 100, 100, 0, 100, 0]), workload).weights.host - host).toBe(16 * 2 * 2048 * (2048 - 512) * 2);
  });

  it("lists each layer object's tensors as the description does, in its order and [out, in]", () => {
    const d = llamaDescriptionFromHf({ ...hf, model_type: 'qwen2', num_hidden_layers: 2 });
    const objects = layerObjects(modelShapeOfDescription(d));
    expect(objects.map((o) => o.name)).toEqual(['input_embed', 'attention_0', 'mlp_0', 'attention_1', 'mlp_1', 'output_embed']);
    const layer1 = [...objects[3]!.tensors, ...objects[4]!.tensors];
    expect(layer1.map((t) => t.name)).toEqual(d.layerTensors.map((t) => `layers.1.${t.checkpointSuffix}`));
    expect(layer1.map((t) => t.shape)).toEqual(d.layerTensors.map((t) => [...t.shape].reverse()));
    // Qwen2's q/k/v biases are there, sized by their heads.
    expect(layer1.find((t) => t.name.endsWith('k_proj.bias'))!.shape).toEqual([512]);
  });
});

describe('planMemory with tensors the backend holds as blocks (ModelShape.family.held: a GGUF file on oneDNN)', () => {
  const hf = { model_type: 'llama', hidden_size: 2048, num_hidden_layers: 16, num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 8192, vocab_size: 128256, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: true };
  const plain = modelShapeOfDescription(llamaDescriptionFromHf(hf));
  // Q4_0: 18 bytes per 32 weights, for every matrix, the token table and the (tied) head.
  const q40 = (elements: number) => (elements / 32) * 18;
  const held: Record<string, number> = { 'embed_tokens.weight': q40(128256 * 2048), 'lm_head.weight': q40(128256 * 2048) };
  const matrices = plain.family!.layerTensors.filter((t) => t.shape.length === 2);
  for (let i = 0; i < 16; i++) for (const t of matrices) held[`layers.${i}.${t.name}`] = q40(t.shape[0]! * t.shape[1]!);
  const shape = { ...plain, family: { ...plain.family!, held } };
  const resident = policy([100, 0, 100, 0, 100, 0]);

  it('counts them at their bytes when every weight is resident, float32 for the rest (norms)', () => {
    const norms = 16 * 2 * 2048 * 4;
    const plan = planMemory(shape, resident, workload);
    expect(plan.weights.compute).toBe(16 * matrices.reduce((a, t) => a + q40(t.shape[0]! * t.shape[1]!), 0) + norms + q40(128256 * 2048));
    expect(plan.head).toBe(q40(128256 * 2048) + 2048 * 4);
    // About a seventh of the float32 plan's weights, and the loading no longer passes every layer through float32.
    const fp32 = planMemory(plain, resident, workload);
    expect(plan.weights.compute / fp32.weights.compute).toBeLessThan(0.15);
    expect(plan.loading).toBeLessThan(fp32.loading / 4);
    expect(plan.ramBytes).toBeLessThan(fp32.ramBytes / 2); // the rest: KV cache and workspace of 16 × 512 tokens
  });

  it('keeps them as blocks on the host and disk tiers and under compression; the token table and head stay resident', () => {
    const layerBlocks = matrices.reduce((a, t) => a + q40(t.shape[0]! * t.shape[1]!), 0);
    const f16Norms = 16 * 2 * 2048 * 2 + 2048 * 2; // two a layer and the final norm, f16 off the compute tier
    for (const [tier, percents] of [['host', [0, 100, 100, 0, 100, 0]], ['disk', [0, 0, 100, 0, 100, 0]]] as const) {
      const plan = planMemory(shape, policy([...percents]), workload);
      expect(plan.weights[tier], tier).toBe(16 * layerBlocks + f16Norms);
      expect(plan.weights.compute, tier).toBe(q40(128256 * 2048));
      expect(plan.head, tier).toBe(q40(128256 * 2048));
      // Widened, the same tier held every matrix and both tables in f16: ~3.5× the bytes.
      const widened = planMemory(plain, policy([...percents]), workload);
      expect(widened.weights[tier] / plan.weights[tier], tier).toBeGreaterThan(3.4);
      // The blocks are read where they lie: the workspace holds no float32 or packed copy of a streamed layer.
      expect(plan.workspace, tier).toBeLessThan(widened.workspace);
    }
    // FlexGen's 4-bit compression leaves the blocks alone (they are already 4-bit): the same weights.
    const p = [0, 100, 100, 0, 100, 0];
    expect(planMemory(shape, policy(p, { compressWeight: true }), workload).weights).toEqual(planMemory(shape, policy(p), workload).weights);
  });
});

describe('planMemory for the new kinds (Gemma 2 2B sizes: head_dim apart from hidden, four norms, GeGLU, tied head)', () => {
  // Gemma-2-2B's sizes: hidden 2304, 8 heads × 256 (2048 ≠ 2304), 4 KV heads, GeGLU 9216, vocabulary 256000, tied.
  const base = llamaDescriptionFromHf({
    model_type: 'llama', hidden_size: 2304, head_dim: 256, num_hidden_layers: 26, num_attention_heads: 8, num_key_value_heads: 4, intermediate_size: 9216,
    vocab_size: 256000, max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: true,
  });
  const branchNorm = (key: string, suffix: string, group: 'attention' | 'mlp') => ({ key, shape: [2304], group, checkpointSuffix: suffix });
  const gemma: ModelDescription = {
    ...base,
    family: 'gemma2',
    norm: { ...base.norm, kind: 'rmsnorm-plus-one', placement: 'pre-and-post-branch' },
    attention: { ...base.attention, scale: 256 ** -0.5, logitSoftcap: 50, slidingWindow: 4096, slidingWindowLayers: 'even' },
    mlp: { ...base.mlp, kind: 'geglu-tanh' },
    embedding: { ...base.embedding, scale: Math.sqrt(2304) },
    finalLogitSoftcap: 30,
    layerTensors: [...base.layerTensors, branchNorm('attnOutNormW', 'post_attention_layernorm.weight', 'attention'), branchNorm('mlpOutNormW', 'post_feedforward_layernorm.weight', 'mlp')],
  };
  const shape = modelShapeOfDescription(gemma);

  it("counts q and o at heads × head_dim, k/v at the KV heads', gate/up/down and four norms a layer; the tied head as its own copy", () => {
    const layer = 2 * 2304 * 2048 + 2 * 2304 * 1024 + 3 * 2304 * 9216 + 4 * 2304;
    const host = planMemory(shape, policy([0, 100, 100, 0, 100, 0]), workload).weights.host;
    expect(host).toBe((26 * layer + 256000 * 2304 + 2304 + 256000 * 2304) * 2);
    expect(shape.family!.gatedMlp).toBe(true);
    expect(shape.family!.tiedHead).toBe(true);
  });

  it('sizes the KV cache by 4 KV heads × 256 per token and layer, every position kept (the window is a mask)', () => {
    const perSeq = (workload.promptLen + workload.genLen - 1) * 2 * 4 * 256 * 26;
    expect(planMemory(shape, policy([100, 0, 0, 100, 100, 0]), workload).cache.host).toBe(16 * perSeq * 2);
  });

  it('plans the attention output and the streamed q/k/v at heads × head_dim, not hidden', () => {
    const p = policy([0, 100, 100, 0, 100, 0]);
    const wide = planMemory(shape, p, workload).workspace;
    // The same model with head_dim 288 (heads × head_dim = hidden) plans more: the width, not the hidden size, counts.
    const asHidden = modelShapeOfDescription({ ...gemma, attention: { ...gemma.attention, headDim: 288 } });
    const perMicroBatch = 8 * 512 * (2304 - 2048) * 4;
    const streamedQkv = 2304 * (2304 - 2048) * 4 + 2304 * 2 * 4 * (288 - 256) * 4;
    expect(planMemory(asHidden, p, workload).workspace - wide).toBeGreaterThanOrEqual(2 * perMicroBatch + streamedQkv);
  });
});
