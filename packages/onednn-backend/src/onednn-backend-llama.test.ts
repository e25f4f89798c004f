import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate, llamaDescriptionFromHf, Engine, type ModelDescription } from '@flexhelm/engine';
import { describe, expect, it } from 'vitest';
import { logitError, passesGate } from './logit-error.js';
import { measureAccuracy } from './measure-accuracy.js';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';
import { conformanceDir } from './test-conformance-dir.js';
import { StreamingHarness } from './test-streaming-harness.js';

const available = oneDnnStatus().available;

const V = 320;
/** Random Llama-family models (in memory): GQA with a sliding window shorter than the prompts, and Qwen2's biases and tied head. */
const models: [string, ModelDescription][] = [
  ['mistral, GQA 4/2, window 6', llamaDescriptionFromHf({ model_type: 'mistral', vocab_size: V, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 96, max_position_embeddings: 128, sliding_window: 6 })],
  ['qwen2, one kv head, q/k/v biases, tied head', llamaDescriptionFromHf({ model_type: 'qwen2', vocab_size: V, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 1, intermediate_size: 96, max_position_embeddings: 128, rope_theta: 1e6 })],
];
const prompts = [
  [1, 17, 250, 33, 4, 99, 7, 8, 9, 10, 11, 12, 13],
  [1, 150, 151, 3, 299],
  [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
];

async function promptLogits(engine: Engine): Promise<Float32Array> {
  const L = Math.max(...prompts.map((r) => r.length));
  const run = engine.startBatch(prompts.length);
  const hidden = await run.step(
    prompts.map((r) => [...Array<number>(L - r.length).fill(0), ...r]),
    prompts.map((r) => [...Array<number>(L - r.length).fill(0), ...r.map(() => 1)]),
  );
  const logits = Float32Array.from(await run.logits(hidden, L, prompts.flatMap((r, row) => r.map((_, j) => ({ row, pos: L - r.length + j })))));
  await run.close();
  return logits;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const greedy = prompts.map((prompt) => ({ prompt, maxNewTokens: 12, stopAtEos: false }));
const ids = (r: Awaited<ReturnType<typeof generate>>) => r.map((x) => x.completions[0]!.tokens.map((t) => t.id));

describe.skipIf(!available)('OneDnnBackend computes the Llama family from its description', () => {
  it.each(models)('%s: fp32 follows the reference (prompt logits within 1e-4, same greedy ids through the cache), bf16 within 0.1', { timeout: 120_000 }, async (_, d) => {
    const ref = await Engine.dummy(d, { backend: 'reference', seed: 5 });
    const fp32 = await Engine.dummy(d, { backend: new OneDnnBackend({ dtype: 'fp32' }), seed: 5 });
    const bf16 = await Engine.dummy(d, { backend: new OneDnnBackend({ dtype: 'bf16' }), seed: 5 });
    const expected = await promptLogits(ref);
    expect(maxAbsDiff(await promptLogits(fp32), expected)).toBeLessThan(1e-4);
    // llama/check.md's bf16 tolerance (0.1 absolute; these logits have rms 1-2), and a mean error far below it.
    const e = logitError(expected, await promptLogits(bf16), expected.length / V, V);
    expect(e.maxAbs).toBeLessThan(0.1);
    expect(e.meanAbs).toBeLessThan(0.01 * e.refRms);
    expect(e.maxAbs).toBeGreaterThan(0); // really computed in bf16
    // Past the window and the first cache growth (capacity = prompt + 64 … here 12 new tokens stay inside it).
    const a = await generate(ref, greedy);
    const b = await generate(fp32, greedy);
    expect(ids(b)).toEqual(ids(a));
    b.forEach((r, i) => {
      expect(r.completions[0]!.sumLogprob).toBeCloseTo(a[i]!.completions[0]!.sumLogprob, 3);
    });
    for (const engine of [ref, fp32, bf16]) await engine.close();
  });

  it('auto keeps bf16 on a Llama model when it passes the gate, and measureAccuracy reports bf16 against fp32', { timeout: 120_000 }, async () => {
    const d = models[1]![1];
    const notices: string[] = [];
    const backend = new OneDnnBackend({ onNotice: (m) => notices.push(m) });
    const auto = await Engine.dummy(d, { backend, seed: 5 });
    await generate(auto, [{ prompt: prompts[0]!, maxNewTokens: 2, stopAtEos: false }]);
    expect(backend.dtype).toBe('bf16');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/^oneDNN compute dtype bf16 \(accuracy gate on the first batch, 13 positions vs fp32: bf16: max \|Δ\| .* → passed\)$/);
    const fp32 = await Engine.dummy(d, { backend: new OneDnnBackend({ dtype: 'fp32' }), seed: 5 });
    const report = await measureAccuracy(fp32, auto, prompts, { newTokens: 16 });
    expect(passesGate(report.logits)).toBe(true);
    expect(report.greedy.tokens).toBe(48);
    expect(report.greedy.teacherForcedAgree).toBeGreaterThanOrEqual(44);
    await auto.close();
    await fp32.close();
  });

  it.each([
    ['attention resident, MLP streamed', ['attention']],
    ['every tensor streamed', []],
  ] as const)('streamed layers (%s) compute what the resident layers compute', { timeout: 120_000 }, async (_, residentGroups) => {
    const d = models[0]![1];
    const resident = await Engine.dummy(d, { backend: new OneDnnBackend({ dtype: 'fp32' }), seed: 5 });
    const expected = await promptLogits(resident);
    const residentIds = ids(await generate(resident, greedy));
    await resident.close();
    const inner = new OneDnnBackend({ dtype: 'fp32' });
    const engine = await Engine.dummy(d, { backend: new StreamingHarness(inner, residentGroups), seed: 5 });
    // Fewer rows than packAtRows: the streamed parts multiply their fp32 weights unpacked, the resident ones packed.
    expect(maxAbsDiff(await promptLogits(engine), expected)).toBeLessThan(1e-4);
    expect(ids(await generate(engine, greedy))).toEqual(residentIds);
    expect(inner.packing.layers).toBeGreaterThan(2);
    await engine.close();
  });

  it('bf16 keeps a Llama model\'s KV cache in bf16 (half the bytes); auto narrows its first batch\'s cache once it keeps bf16', { timeout: 60_000 }, async () => {
    const d = models[0]![1];
    const caches = [];
    for (const dtype of ['fp32', 'bf16', 'auto'] as const) {
      const backend = new OneDnnBackend({ dtype, onNotice: () => {} });
      const engine = await Engine.dummy(d, { backend, seed: 5 });
      const cache = backend.openKvCache(1);
      await cache.forward!(Int32Array.from([1, 17, 250]), Int32Array.from([0, 1, 2]), { batch: 1, seq: 3, pastLen: 0, maskBias: Float32Array.from([0, -1e30, -1e30, 0, 0, -1e30, 0, 0, 0]) });
      caches.push({ kind: cache.k[0]!.constructor.name, cacheDtype: cache.dtype, bytes: cache.bytes });
      await cache.close();
      await engine.close();
    }
    expect(caches.map((c) => [c.kind, c.cacheDtype])).toEqual([['Float32Array', 'fp32'], ['Uint16Array', 'bf16'], ['Uint16Array', 'bf16']]);
    expect(caches[1]!.bytes).toBe(caches[0]!.bytes / 2);
  });

  it('refuses a description it does not compute, naming what is wrong', async () => {
    const d = models[0]![1];
    await expect(new OneDnnBackend({ dtype: 'fp32' }).init({ ...d, mlp: { ...d.mlp, kind: 'gelu' } })).rejects.toThrow(/the oneDNN backend does not compute mlp:gelu yet/);
    // LayerNorm is a kind the layer has (OPT's), but only before or after the residual add.
    await expect(new OneDnnBackend({ dtype: 'fp32' }).init({ ...d, norm: { ...d.norm, kind: 'layernorm', placement: 'pre-and-post-branch' } })).rejects.toThrow(/LayerNorm before \(pre\) or after \(post\)/);
  });
});

interface LlamaGolden {
  prompts: number[][];
  greedy: { max_new_tokens: number; generated_ids: number[][] };
}

const conformance = conformanceDir('llama');
describe.skipIf(!available || (!conformance && !process.env.CI))('bf16 with its bf16 KV cache on the Llama-family conformance models (transformers 4.47.1 golden data)', () => {
  // mistral-a: sequences past its window of 8 (GQA 4/2); llama-b: GQA 8/2 with head size 8; llama-a: MHA.
  it.each(['llama-a', 'llama-b', 'mistral-a'])('%s: greedy ids as the golden run, logit gate against fp32 over prompt + continuation', { timeout: 120_000 }, async (model) => {
    const golden = JSON.parse(readFileSync(join(conformance, model, 'golden.json'), 'utf8')) as LlamaGolden;
    const reference = await Engine.load(join(conformance, model, 'f32'), { backend: new OneDnnBackend({ dtype: 'fp32' }) });
    const backend = new OneDnnBackend({ dtype: 'bf16' });
    const bf16 = await Engine.load(join(conformance, model, 'f32'), { backend });
    expect(backend.openKvCache(1).dtype).toBe('bf16');
    const results = await generate(bf16, golden.prompts.map((prompt) => ({ prompt, maxNewTokens: golden.greedy.max_new_tokens, stopAtEos: false })), { maxBatchSize: golden.prompts.length });
    expect(ids(results)).toEqual(golden.greedy.generated_ids);
    const report = await measureAccuracy(reference, bf16, golden.prompts, { newTokens: golden.greedy.max_new_tokens });
    expect(passesGate(report.logits)).toBe(true);
    expect(report.greedy.teacherForcedAgree / report.greedy.tokens).toBeGreaterThanOrEqual(0.95);
    await reference.close();
    await bf16.close();
  });
});
