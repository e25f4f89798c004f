import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argmax, Engine, generate, makeHubModel, ReferenceBackend, type DecoderBackend } from '@flexhelm/engine';
import { OffloadingBackend, parsePolicy, percentsFromArgs } from '@flexhelm/offload';
import { afterAll, describe, expect, it } from 'vitest';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';
import { conformanceDir } from './test-conformance-dir.js';

const available = oneDnnStatus().available;
const GOLDEN = conformanceDir('families');
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-onednn-moe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: ({ logits: number[] } | null)[][];
  greedy: { generated_ids: number[][]; max_new_tokens: number };
}

/** The worst prompt-logit error of the golden's padded batch, and greedy ids through the backend's KV cache. */
async function againstGolden(engine: Engine, g: Golden): Promise<{ prompt: number; ids: number[][] }> {
  const V = engine.description.vocabSize;
  const L = g.input_ids[0]!.length;
  const logits = await engine.forwardLogits(g.input_ids, g.attention_mask);
  let prompt = 0;
  for (const [b, rows] of g.prompt_logits.entries()) {
    for (const [t, r] of rows.entries()) if (r) for (let v = 0; v < V; v++) prompt = Math.max(prompt, Math.abs(logits[(b * L + t) * V + v]! - r.logits[v]!));
  }
  const run = engine.startBatch(g.prompts.length);
  let step = await run.stepLogits(g.input_ids, g.attention_mask);
  let last = g.prompts.map((_, b) => step.slice((b * L + L - 1) * V, (b * L + L) * V));
  const ids: number[][] = g.prompts.map(() => []);
  for (let s = 0; s < g.greedy.max_new_tokens; s++) {
    last.forEach((row, b) => {
      ids[b]!.push(argmax(row));
    });
    if (s === g.greedy.max_new_tokens - 1) break;
    step = await run.stepLogits(g.greedy.generated_ids.map((r) => [r[s]!]), ids.map(() => [1]));
    last = g.prompts.map((_, b) => step.slice(b * V, (b + 1) * V));
  }
  await run.close();
  return { prompt, ids };
}

describe.skipIf(!available || (!GOLDEN && !process.env.CI))('OneDnnBackend on a mixture of experts (attention native, experts as GEMMs)', () => {
  it('mixtral-a: fp32 within 1e-4 of transformers (greedy ids exact); bf16 within 0.1', { timeout: 120_000 }, async () => {
    const g = JSON.parse(readFileSync(join(GOLDEN, 'mixtral-a', 'golden.json'), 'utf8')) as Golden;
    const fp32 = await Engine.load(join(GOLDEN, 'mixtral-a', 'f32'), { backend: new OneDnnBackend({ dtype: 'fp32' }) });
    const f = await againstGolden(fp32, g);
    await fp32.close();
    expect(f.prompt).toBeLessThan(1e-4);
    expect(f.ids).toEqual(g.greedy.generated_ids);
    const bf16 = await Engine.load(join(GOLDEN, 'mixtral-a', 'f32'), { backend: new OneDnnBackend({ dtype: 'bf16' }) });
    const b = await againstGolden(bf16, g);
    await bf16.close();
    expect(b.prompt).toBeLessThan(0.1);
    expect(b.prompt).toBeGreaterThan(0);
  });
});

// A Qwen2-MoE of check.md's shape (shared expert with its gate, dense layers 0 and 2, experts not renormalised), f16.
const qwen = join(dir, 'qwen2-moe');
const makeQwen = () =>
  makeHubModel({
    config: { base: 'qwen1.5-moe-a2.7b', vocab_size: 1000, hidden_size: 32, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, decoder_sparse_step: 2, num_experts: 6, num_experts_per_tok: 2, moe_intermediate_size: 32, shared_expert_intermediate_size: 48, max_position_embeddings: 128 },
    outDir: qwen,
    dtype: 'f16',
  });

describe.skipIf(!available)('OneDnnBackend on a Qwen2-MoE, resident and offloaded with experts read on demand', () => {
  const requests = [
    { prompt: [5, 17, 250, 9, 33, 7], maxNewTokens: 5, topLogprobs: 2, echoPrompt: true },
    { prompt: [400, 2, 71, 88, 3, 640], maxNewTokens: 4, topLogprobs: 2, echoPrompt: true },
  ];
  const run = async (backend: DecoderBackend, maxBatchSize = 1) => {
    const engine = await Engine.load(qwen, { backend });
    try {
      return (await generate(engine, requests, { maxBatchSize })).map((r) => r.completions[0]!);
    } finally {
      await engine.close();
    }
  };
  const logprobs = (cs: Awaited<ReturnType<typeof run>>) => cs.flatMap((c) => [...c.promptTokens!.slice(1), ...c.tokens].map((t) => t.logprob!));
  const ids = (cs: Awaited<ReturnType<typeof run>>) => cs.map((c) => c.tokens.map((t) => t.id));

  it('fp32 matches the reference within 1e-4, resident and with every weight on disk (experts read alone in decode steps)', { timeout: 120_000 }, async () => {
    makeQwen();
    const reference = await run(new ReferenceBackend());
    const resident = await run(new OneDnnBackend({ dtype: 'fp32' }));
    expect(ids(resident)).toEqual(ids(reference));
    const worst = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i]!)));
    expect(worst(logprobs(resident), logprobs(reference))).toBeLessThan(1e-4);
    const offloading = new OffloadingBackend(new OneDnnBackend({ dtype: 'fp32' }), parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, ...percentsFromArgs([0, 0, 100, 0, 100, 0]) }), { offloadDir: join(dir, 'off'), direct: false });
    const offloaded = await run(offloading);
    expect(ids(offloaded)).toEqual(ids(reference));
    expect(worst(logprobs(offloaded), logprobs(reference))).toBeLessThan(1e-4);
    expect(offloading.stats.expertLoads).toBeGreaterThan(0);
  });

  it('bf16 stays within 0.1 of the reference in logprobs', { timeout: 120_000 }, async () => {
    const reference = await run(new ReferenceBackend());
    const bf16 = await run(new OneDnnBackend({ dtype: 'bf16' }));
    const worst = Math.max(...logprobs(bf16).map((x, i) => Math.abs(x - logprobs(reference)[i]!)));
    expect(worst).toBeLessThan(0.1);
    expect(worst).toBeGreaterThan(0);
  });
});
