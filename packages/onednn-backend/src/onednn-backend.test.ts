import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModel, Engine, generate, descriptionByName } from '@flexhelm/engine';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeLogitError, passesGate } from './logit-error.js';
import { measureAccuracy } from './measure-accuracy.js';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';
import { conformanceDir } from './test-conformance-dir.js';

const available = oneDnnStatus().available;
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-onednn-'));
const preLn = { name: 'tiny-pre', hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 256, vocabSize: 500, maxPositionEmbeddings: 128 };
const postLn = { ...preLn, name: 'tiny-post', wordEmbedProjDim: 32, doLayerNormBefore: false };
const prompts = [
  [2, 17, 250, 33, 4, 99],
  [2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
  [2, 150, 151],
];

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function promptLogits(engine: Engine, rows: number[][]): Promise<Float32Array> {
  const L = Math.max(...rows.map((r) => r.length));
  const run = engine.startBatch(rows.length);
  const hidden = await run.step(
    rows.map((r) => [...Array<number>(L - r.length).fill(1), ...r]),
    rows.map((r) => [...Array<number>(L - r.length).fill(0), ...r.map(() => 1)]),
  );
  return Float32Array.from(await run.logits(hidden, L, rows.flatMap((r, row) => r.map((_, j) => ({ row, pos: L - r.length + j })))));
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe.skipIf(!available)('OneDnnBackend against the plain-TS reference', () => {
  const engines: Record<string, Engine> = {};
  beforeAll(async () => {
    makeModel({ config: preLn, outDir: join(dir, 'pre'), seed: 3 });
    makeModel({ config: postLn, outDir: join(dir, 'post'), seed: 5 });
    for (const model of ['pre', 'post']) {
      engines[`${model}-ref`] = await Engine.load(join(dir, model), { backend: 'reference' });
      for (const dtype of ['fp32', 'bf16', 'int8'] as const) {
        engines[`${model}-${dtype}`] = await Engine.load(join(dir, model), { backend: new OneDnnBackend({ dtype, experimental: true }) });
      }
    }
  });
  afterAll(async () => {
    for (const e of Object.values(engines)) await e.close();
  });

  it.each(['pre', 'post'])('%s-LN: fp32 within 1e-4 of the reference, bf16 and int8 within their gates', async (model) => {
    const ref = await promptLogits(engines[`${model}-ref`]!, prompts);
    expect(maxAbsDiff(await promptLogits(engines[`${model}-fp32`]!, prompts), ref)).toBeLessThan(1e-4);
    const rows = ref.length / preLn.vocabSize;
    const { logitError } = await import('./logit-error.js');
    const bf16 = logitError(ref, await promptLogits(engines[`${model}-bf16`]!, prompts), rows, preLn.vocabSize);
    expect(passesGate(bf16)).toBe(true);
    expect(bf16.maxAbs).toBeGreaterThan(0); // really computed in bf16
    const int8 = logitError(ref, await promptLogits(engines[`${model}-int8`]!, prompts), rows, preLn.vocabSize);
    expect(int8.meanAbs).toBeLessThan(0.05 * int8.refRms);
  });

  it('greedy generation with the KV cache matches the reference exactly in fp32', async () => {
    const requests = prompts.map((prompt) => ({ prompt, maxNewTokens: 10, stopAtEos: false }));
    for (const model of ['pre', 'post']) {
      const ref = await generate(engines[`${model}-ref`]!, requests);
      const fast = await generate(engines[`${model}-fp32`]!, requests);
      expect(fast.map((r) => r.completions[0]!.tokens.map((t) => t.id))).toEqual(ref.map((r) => r.completions[0]!.tokens.map((t) => t.id)));
      fast.forEach((r, i) => { expect(r.completions[0]!.sumLogprob).toBeCloseTo(ref[i]!.completions[0]!.sumLogprob, 3); });
    }
  });

  it('the backend-owned KV cache grows in place: fp32 follows the reference through a long generation (head size 48)', { timeout: 60_000 }, async () => {
    // Head size 48 takes both column widths of the vector P·V kernel; a 40-token prompt spans two key tiles and five
    // 8-row query blocks; 70 new tokens outgrow the prompt's capacity (40 + 64), so the cache is re-laid out once.
    const config = { name: 'tiny-wide', hiddenSize: 96, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 192, vocabSize: 300, maxPositionEmbeddings: 128 };
    makeModel({ config, outDir: join(dir, 'wide'), seed: 7 });
    const ref = await Engine.load(join(dir, 'wide'), { backend: 'reference' });
    const backend = new OneDnnBackend({ dtype: 'fp32' });
    const fast = await Engine.load(join(dir, 'wide'), { backend });
    const long = Array.from({ length: 40 }, (_, i) => 2 + ((i * 37) % 290));
    const rows = [long, long.slice(0, 13), long.slice(5, 30)];
    expect(maxAbsDiff(await promptLogits(fast, rows), await promptLogits(ref, rows))).toBeLessThan(1e-4);
    const requests = rows.map((prompt) => ({ prompt, maxNewTokens: 70, stopAtEos: false }));
    const a = await generate(ref, requests);
    const b = await generate(fast, requests);
    expect(b.map((r) => r.completions[0]!.tokens.map((t) => t.id))).toEqual(a.map((r) => r.completions[0]!.tokens.map((t) => t.id)));
    b.forEach((r, i) => { expect(r.completions[0]!.sumLogprob).toBeCloseTo(a[i]!.completions[0]!.sumLogprob, 3); });
    const cache = backend.openKvCache(2);
    expect(() => cache.forward!(new Int32Array(2), new Int32Array(2), { batch: 2, seq: 1, pastLen: 3, maskBias: new Float32Array(8) })).toThrow(
      /^OneDnnKvCache: step continues after 3 tokens, the cache holds 0$/,
    );
    await cache.close();
    await ref.close();
    await fast.close();
  });

  it('auto keeps bf16 when it passes the gate on the first batch, and says so', async () => {
    const notices: string[] = [];
    const backend = new OneDnnBackend({ onNotice: (m) => notices.push(m) });
    const engine = await Engine.load(join(dir, 'pre'), { backend });
    expect(backend.dtype).toBe('auto');
    const [first] = await generate(engine, [{ prompt: prompts[1]!, maxNewTokens: 4, stopAtEos: false }]);
    expect(backend.dtype).toBe('bf16');
    expect(backend.name).toBe('onednn-bf16');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/^oneDNN compute dtype bf16 \(accuracy gate on the first batch, 11 positions vs fp32: bf16: max \|Δ\| .* → passed\)$/);
    expect(backend.decision!.candidates.map((c) => c.dtype)).toEqual(['bf16']);
    // The first batch too is computed in the dtype kept: exactly what the bf16 engine gives (tokens and logprobs), so
    // which batch happened to come first never shows in the results.
    const [bf16] = await generate(engines['pre-bf16']!, [{ prompt: prompts[1]!, maxNewTokens: 4, stopAtEos: false }]);
    expect(first!.completions[0]!.tokens).toEqual(bf16!.completions[0]!.tokens);
    expect(first!.completions[0]!.sumLogprob).toBe(bf16!.completions[0]!.sumLogprob);
    await engine.close();
  });

  it('bf16 keeps its KV cache in bf16 (half the bytes of fp32); auto narrows its first batch\'s cache once it keeps bf16', async () => {
    const ids = Int32Array.from([2, 17, 250]);
    const positions = Int32Array.from([2, 3, 4]);
    const step = { batch: 1, seq: 3, pastLen: 0, maskBias: Float32Array.from([0, -1e30, -1e30, 0, 0, -1e30, 0, 0, 0]) };
    const caches = [];
    for (const dtype of ['fp32', 'bf16', 'auto'] as const) {
      const backend = new OneDnnBackend({ dtype, onNotice: () => {} });
      const engine = await Engine.load(join(dir, 'pre'), { backend });
      const cache = backend.openKvCache(1);
      await cache.forward!(ids, positions, step);
      caches.push({ dtype, kind: cache.k[0]!.constructor.name, cacheDtype: cache.dtype, bytes: cache.bytes });
      await cache.close();
      await engine.close();
    }
    expect(caches.map((c) => [c.dtype, c.kind, c.cacheDtype])).toEqual([['fp32', 'Float32Array', 'fp32'], ['bf16', 'Uint16Array', 'bf16'], ['auto', 'Uint16Array', 'bf16']]);
    expect(caches[1]!.bytes).toBe(caches[0]!.bytes / 2);
  });

  it('auto tries int8 too when experimental, and stays on fp32 when no candidate passes the gate', async () => {
    const notices: string[] = [];
    const backend = new OneDnnBackend({ experimental: true, gate: { maxRelative: 0, meanRelative: 0 }, onNotice: (m) => notices.push(m) });
    const engine = await Engine.load(join(dir, 'post'), { backend });
    const [res] = await generate(engine, [{ prompt: prompts[0]!, maxNewTokens: 3, stopAtEos: false }]);
    expect(backend.dtype).toBe('fp32');
    expect(backend.decision!.candidates.map((c) => [c.dtype, c.passed])).toEqual([['bf16', false], ['int8', false]]);
    expect(notices[0]).toMatch(/^oneDNN compute dtype fp32 \(.*bf16: .* → failed; int8: .* → failed\)$/);
    const [fp32] = await generate(engines['post-fp32']!, [{ prompt: prompts[0]!, maxNewTokens: 3, stopAtEos: false }]);
    expect(res!.completions[0]!.tokens.map((t) => t.id)).toEqual(fp32!.completions[0]!.tokens.map((t) => t.id));
    await engine.close();
  });

  it('auto skips the gate when the fp32 and bf16 copies would not fit in memory', async () => {
    const notices: string[] = [];
    const backend = new OneDnnBackend({ onNotice: (m) => notices.push(m) });
    await backend.init(descriptionByName('opt-66b'));
    expect(backend.dtype).toBe('bf16');
    expect(notices[0]).toMatch(/^oneDNN compute dtype bf16 \(accuracy gate skipped: fp32 and bf16 copies of opt-66b's \d+\.\d GiB .* would not fit/);
    await backend.dispose();
  });

  it('refuses int8 without the experimental flag and unknown dtypes', () => {
    expect(() => new OneDnnBackend({ dtype: 'int8' })).toThrow(/int8 is experimental .* pass \{ experimental: true \}/);
    expect(() => new OneDnnBackend({ dtype: 'fp16' as 'fp32' })).toThrow(/^OneDnnBackend: dtype must be 'auto', 'fp32', 'bf16' or 'int8', got 'fp16'$/);
    expect(() => new OneDnnBackend({ chunkBytes: -1 })).toThrow(/^OneDnnBackend: chunkBytes: .*>=0/);
  });
});

interface GoldenRecord {
  logits: number[];
  argmax: number;
  top1_margin: number;
}
interface Golden {
  input_ids: number[][];
  attention_mask: number[][];
  prompts: number[][];
  prompt_logits: (GoldenRecord | null)[][];
  greedy: { generated_ids: number[][] };
}

// The golden data sits beside the checkout (../shared/conformance), as the conformance runner expects it.
const conformance = conformanceDir('opt');
describe.skipIf(!available || (!conformance && !process.env.CI))('OneDnnBackend on the conformance models (transformers 4.33.3 golden data)', () => {
  it.each(['tiny-a', 'tiny-c'])('%s: fp32 within 1e-4, bf16 argmax-exact where the margin allows; greedy ids exact', { timeout: 120_000 }, async (model) => {
    const golden = JSON.parse(readFileSync(join(conformance, model, 'golden.json'), 'utf8')) as Golden;
    for (const [dtype, tolerance] of [
      ['fp32', 1e-4],
      ['bf16', 2e-2],
    ] as const) {
      for (const weights of ['f32', 'f16']) {
        const engine = await Engine.load(join(conformance, model, weights), { backend: new OneDnnBackend({ dtype }) });
        const run = engine.startBatch(golden.input_ids.length);
        const L = golden.input_ids[0]!.length;
        const hidden = await run.step(golden.input_ids, golden.attention_mask);
        const picks = golden.attention_mask.flatMap((m, row) => m.flatMap((on, pos) => (on ? [{ row, pos }] : [])));
        const logits = await run.logits(hidden, L, picks);
        const V = engine.description.vocabSize;
        let worst = 0;
        picks.forEach((p, i) => {
          const record = golden.prompt_logits[p.row]![p.pos]!;
          const got = logits.subarray(i * V, (i + 1) * V);
          const err = maxAbsDiff(record.logits, got);
          worst = Math.max(worst, err);
          let best = 0;
          for (let v = 1; v < V; v++) if (got[v]! > got[best]!) best = v;
          if (record.top1_margin > 2 * tolerance) expect(best, `${model} ${dtype} row ${p.row} pos ${p.pos}`).toBe(record.argmax);
        });
        expect(worst, `${model} ${dtype} ${weights}`).toBeLessThan(tolerance);
        const results = await generate(engine, golden.prompts.map((prompt) => ({ prompt, maxNewTokens: 8, stopAtEos: false })), { maxBatchSize: 3 });
        expect(results.map((r) => r.completions[0]!.tokens.map((t) => t.id))).toEqual(golden.greedy.generated_ids);
        await engine.close();
      }
    }
  });
});

describe.skipIf(!available || (!conformance && !process.env.CI))('bf16 against fp32 on the conformance models, 64 greedy tokens', () => {
  it.each(['tiny-a', 'tiny-c'])('%s: logit gate over prompt + continuation, greedy agreement', { timeout: 120_000 }, async (model) => {
    const golden = JSON.parse(readFileSync(join(conformance, model, 'golden.json'), 'utf8')) as Golden;
    const reference = await Engine.load(join(conformance, model, 'f32'), { backend: new OneDnnBackend({ dtype: 'fp32' }) });
    const bf16 = await Engine.load(join(conformance, model, 'f32'), { backend: new OneDnnBackend({ dtype: 'bf16' }) });
    // 64 new tokens where the model's positions allow (tiny-c has 64 positions: 53 after its 11-token prompt).
    const newTokens = Math.min(64, reference.description.maxPositions - Math.max(...golden.prompts.map((p) => p.length)));
    const report = await measureAccuracy(reference, bf16, golden.prompts, { newTokens });
    const summary = `${model}: ${describeLogitError(report.logits)}; greedy free-running ${report.greedy.freeRunningAgree}/${report.greedy.tokens}, teacher-forced ${report.greedy.teacherForcedAgree}/${report.greedy.tokens}`;
    if (process.env.FLEXHELM_ACCURACY_REPORT === '1') console.info(summary);
    expect(report.greedy.tokens).toBe(3 * newTokens);
    expect(passesGate(report.logits), summary).toBe(true);
    expect(report.greedy.teacherForcedAgree / report.greedy.tokens, summary).toBeGreaterThanOrEqual(0.95);
    await reference.close();
    await bf16.close();
  });
});

describe.skipIf(!available)('accuracy gate on a random opt-125m-shaped model (2 layers)', () => {
  // Full opt-125m width and vocabulary, 2 of its 12 layers (about 10 s on an idle 2-core machine; the timeout leaves
  // room for a loaded one).
  it('bf16 agrees with fp32 on 64 greedy tokens per prompt and passes the logit gate', { timeout: 300_000 }, async () => {
    makeModel({ config: { base: 'opt-125m', name: 'opt-125m-2l', numHiddenLayers: 2, maxPositionEmbeddings: 128 }, outDir: join(dir, 'opt125-2l'), seed: 1 });
    const path = join(dir, 'opt125-2l');
    const reference = await Engine.load(path, { backend: new OneDnnBackend({ dtype: 'fp32' }) });
    const bf16 = await Engine.load(path, { backend: new OneDnnBackend({ dtype: 'bf16' }) });
    const report = await measureAccuracy(reference, bf16, [[2, 100, 2000, 30000, 7], [2, 31337, 42, 8, 9, 10, 11]], { newTokens: 64 });
    expect(report.greedy.tokens).toBe(128);
    expect(passesGate(report.logits)).toBe(true);
    expect(report.greedy.teacherForcedAgree / report.greedy.tokens).toBeGreaterThanOrEqual(0.95);
    await reference.close();
    await bf16.close();
  });
});
