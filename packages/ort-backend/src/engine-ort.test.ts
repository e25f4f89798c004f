import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, makeModel, Engine, ReferenceBackend, logSumExp } from '@flexhelm/engine';
import type { BackendKvCache, StepShape } from '@flexhelm/contract';
import { OrtBackend } from './ort-backend.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-engine-'));
const preLn = { name: 'tiny-pre', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 4, ffnDim: 64, vocabSize: 300, maxPositionEmbeddings: 64 };
const postLn = { ...preLn, name: 'tiny-post', wordEmbedProjDim: 16, doLayerNormBefore: false };
const engines: Record<string, Engine> = {};

beforeAll(async () => {
  makeModel({ config: preLn, outDir: join(dir, 'pre-f32'), seed: 7 });
  makeModel({ config: preLn, outDir: join(dir, 'pre-f16'), seed: 7, dtype: 'f16' });
  makeModel({ config: postLn, outDir: join(dir, 'post-f32'), seed: 9 });
  engines.ort = await Engine.load(join(dir, 'pre-f32'), { backend: new OrtBackend() });
  engines.ortF16 = await Engine.load(join(dir, 'pre-f16'), { backend: new OrtBackend() });
  engines.ref = await Engine.load(join(dir, 'pre-f32'), { backend: 'reference' });
  engines.postOrt = await Engine.load(join(dir, 'post-f32'), { backend: new OrtBackend() });
  engines.postRef = await Engine.load(join(dir, 'post-f32'), { backend: 'reference' });
});
afterAll(async () => {
  for (const e of Object.values(engines)) await e.close();
  rmSync(dir, { recursive: true, force: true });
});

const prompts = [
  [2, 17, 250, 33, 4, 99],
  [2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
  [2, 150, 151],
];

/** Logits of every real position of a left-padded batch, by `row:position-in-prompt`. */
async function promptLogits(engine: Engine, rows: number[][]): Promise<Map<string, Float32Array>> {
  const L = Math.max(...rows.map((r) => r.length));
  const ids = rows.map((r) => [...Array<number>(L - r.length).fill(1), ...r]);
  const mask = rows.map((r) => [...Array<number>(L - r.length).fill(0), ...r.map(() => 1)]);
  const run = engine.startBatch(rows.length);
  const hidden = await run.step(ids, mask);
  const picks = rows.flatMap((r, b) => r.map((_, j) => ({ row: b, pos: L - r.length + j })));
  const logits = await run.logits(hidden, L, picks);
  const V = engine.description.vocabSize;
  const out = new Map<string, Float32Array>();
  picks.forEach((p, i) => { out.set(`${p.row}:${p.pos - (L - rows[p.row]!.length)}`, logits.slice(i * V, (i + 1) * V)); });
  return out;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe('Engine forward', () => {
  it('onnxruntime matches the plain-TS reference (pre-LN and post-LN with projections), F16 weights too', async () => {
    for (const [fast, ref] of [
      [engines.ort!, engines.ref!],
      [engines.ortF16!, engines.ref!],
      [engines.postOrt!, engines.postRef!],
    ] as const) {
      const a = await promptLogits(fast, prompts);
      const b = await promptLogits(ref, prompts);
      expect(a.size).toBe(20);
      let worst = 0;
      for (const [key, logits] of a) worst = Math.max(worst, maxAbsDiff(logits, b.get(key)!));
      expect(worst).toBeLessThan(1e-4);
      // a non-degenerate model: logits are neither constant nor exploding
      const sample = a.get('1:10')!;
      expect(Math.max(...sample) - Math.min(...sample)).toBeGreaterThan(0.5);
      expect(Math.max(...sample.map(Math.abs))).toBeLessThan(50);
    }
  });

  it('gives a prompt the same logits alone and inside a left-padded batch', async () => {
    const batch = await promptLogits(engines.ort!, prompts);
    for (let b = 0; b < prompts.length; b++) {
      const alone = await promptLogits(engines.ort!, [prompts[b]!]);
      for (let j = 0; j < prompts[b]!.length; j++) expect(maxAbsDiff(alone.get(`0:${j}`)!, batch.get(`${b}:${j}`)!)).toBeLessThan(1e-5);
    }
  });

  it('refuses ids outside the vocabulary and sequences past the position table', async () => {
    const run = engines.ort!.startBatch(1);
    await expect(run.step([[2, 300]], [[1, 1]])).rejects.toThrow(/token id 300 \(row 0\) is outside the vocabulary 0\.\.299/);
    await expect(generate(engines.ort!, [{ prompt: Array(60).fill(5), maxNewTokens: 10 }])).rejects.toThrow(/exceeds tiny-pre's 64 positions/);
  });
});

describe('generate', () => {
  it('greedy with the KV cache equals argmax of full forwards (teacher-forced) and reports exact logprobs', async () => {
    const [res] = await generate(engines.ort!, [{ prompt: prompts[0]!, maxNewTokens: 6, stopAtEos: false, topLogprobs: 3 }]);
    const tokens = res!.completions[0]!.tokens;
    expect(tokens).toHaveLength(6);
    const seq = [...prompts[0]!, ...tokens.map((t) => t.id)];
    const full = await promptLogits(engines.ref!, [seq]);
    tokens.forEach((t, s) => {
      const l = full.get(`0:${prompts[0]!.length - 1 + s}`)!;
      let best = 0;
      for (let i = 1; i < l.length; i++) if (l[i]! > l[best]!) best = i;
      expect(t.id).toBe(best);
      expect(t.logprob!).toBeCloseTo(l[t.id]! - logSumExp(l), 4);
      expect(t.top).toHaveLength(3);
      expect(t.top[0]!.id).toBe(t.id);
      expect(t.top[0]!.logprob).toBeGreaterThanOrEqual(t.top[1]!.logprob);
    });
    expect(res!.completions[0]!.sumLogprob).toBeCloseTo(tokens.reduce((a, t) => a + t.logprob!, 0), 9);
  });

  it('echoes the prompt with logprobs (none for the first token), also with max_new_tokens 0', async () => {
    const [res] = await generate(engines.ort!, [{ prompt: prompts[1]!, maxNewTokens: 0, echoPrompt: true, topLogprobs: 2 }]);
    const c = res!.completions[0]!;
    expect(c.tokens).toEqual([]);
    expect(c.promptTokens!.map((t) => t.id)).toEqual(prompts[1]);
    expect(c.promptTokens![0]!.logprob).toBeNull();
    const full = await promptLogits(engines.ref!, [prompts[1]!]);
    for (let j = 1; j < prompts[1]!.length; j++) {
      const l = full.get(`0:${j - 1}`)!;
      expect(c.promptTokens![j]!.logprob!).toBeCloseTo(l[prompts[1]![j]!]! - logSumExp(l), 4);
      expect(c.promptTokens![j]!.top).toHaveLength(2);
    }
  });

  it('samples deterministically per seed, and each request keeps its own settings inside a batch', async () => {
    const sampled = { prompt: prompts[2]!, maxNewTokens: 8, temperature: 1.5, topP: 0.95, topK: 50, n: 3, seed: 11, stopAtEos: false };
    const greedy = { prompt: prompts[0]!, maxNewTokens: 8, stopAtEos: false };
    const ids = (r: Awaited<ReturnType<typeof generate>>[number]) => r.completions.map((c) => c.tokens.map((t) => t.id));
    const [a, g1] = await generate(engines.ort!, [sampled, greedy]);
    const [b] = await generate(engines.ort!, [sampled]);
    const [g2] = await generate(engines.ort!, [greedy]);
    expect(ids(a!)).toEqual(ids(b!));
    expect(ids(g1!)).toEqual(ids(g2!));
    expect(new Set(ids(a!).map((x) => x.join(','))).size).toBeGreaterThan(1);
    const [other] = await generate(engines.ort!, [{ ...sampled, seed: 12 }]);
    expect(ids(other!)).not.toEqual(ids(a!));
    // top-k 1 is greedy whatever the temperature
    const [k1] = await generate(engines.ort!, [{ ...greedy, temperature: 2, topK: 1, seed: 5 }]);
    expect(ids(k1!)).toEqual(ids(g2!));
  });

  it('stops on a text stop sequence spanning several tokens', async () => {
    // A toy detokenizer: every id is two letters.
    const decode = (ids: number[]) => ids.map((id) => String.fromCharCode(97 + (id % 26), 97 + (Math.floor(id / 26) % 26))).join('');
    const [free] = await generate(engines.ort!, [{ prompt: prompts[1]!, maxNewTokens: 8, stopAtEos: false }]);
    const text = decode(free!.completions[0]!.tokens.map((t) => t.id));
    const stop = text.slice(3, 8); // starts inside token 2, ends inside token 4
    const [res] = await generate(engines.ort!, [{ prompt: prompts[1]!, maxNewTokens: 8, stopAtEos: false, stopSequences: ['zzzzzz', stop] }], { decode });
    const c = res!.completions[0]!;
    expect(c.finishReason).toBe('stop');
    expect(c.stopSequence).toBe(stop);
    expect(c.tokens).toHaveLength(4);
    await expect(generate(engines.ort!, [{ prompt: [2], stopSequences: ['x'] }])).rejects.toThrow(/need options\.decode/);
  });

  it('batches a long prompt with a long generation when each fits the position table', async () => {
    const [a, b] = await generate(engines.ort!, [
      { prompt: Array(50).fill(7), maxNewTokens: 4, stopAtEos: false },
      { prompt: [2, 3, 4], maxNewTokens: 60, stopAtEos: false },
    ]);
    expect(a!.completions[0]!.tokens).toHaveLength(4);
    expect(b!.completions[0]!.tokens).toHaveLength(60);
    const [alone] = await generate(engines.ort!, [{ prompt: [2, 3, 4], maxNewTokens: 60, stopAtEos: false }]);
    expect(b!.completions[0]!.tokens.map((t) => t.id)).toEqual(alone!.completions[0]!.tokens.map((t) => t.id));
  });

  it('answers requests for nothing without running the model', async () => {
    const results = await generate(engines.ort!, [{ prompt: [2, 5], maxNewTokens: 0 }]);
    expect(results[0]!.completions).toEqual([{ tokens: [], sumLogprob: 0, finishReason: 'length' }]);
    expect(await generate(engines.ort!, [])).toEqual([]);
  });

  it('rejects malformed requests with the field at fault', async () => {
    await expect(generate(engines.ort!, [{ prompt: [] }])).rejects.toThrow(/request 0 is invalid: prompt: prompt must hold at least one token id/);
    await expect(generate(engines.ort!, [{ prompt: [2], topP: 0 }])).rejects.toThrow(/topP/);
  });
});

describe('generate logprob modes', () => {
  it('reports processed (warped) logprobs on request, raw by default', async () => {
    const base = { prompt: prompts[0]!, maxNewTokens: 3, stopAtEos: false, temperature: 0.7, topK: 1, seed: 3 };
    const [raw, processed] = await generate(engines.ort!, [base, { ...base, logprobs: 'processed' }]);
    const r = raw!.completions[0]!.tokens;
    const p = processed!.completions[0]!.tokens;
    expect(p.map((t) => t.id)).toEqual(r.map((t) => t.id));
    for (const t of p) expect(t.logprob).toBe(0); // top-k 1 leaves a single token
    for (const t of r) expect(t.logprob!).toBeLessThan(0);
  });
});

describe('BatchRun and the backend-owned KV cache', () => {
  /** The reference backend, recording each step its caches are given. */
  class RecordingBackend extends ReferenceBackend {
    readonly steps: [number, number, number][] = [];
    closed = 0;
    override openKvCache(batch: number): BackendKvCache {
      const cache = super.openKvCache(batch);
      return {
        forward: (ids: Int32Array, positions: Int32Array, step: StepShape) => {
          this.steps.push([step.batch, step.seq, step.pastLen]);
          return cache.forward(ids, positions, step);
        },
        get bytes() {
          return cache.bytes;
        },
        close: async () => {
          this.closed++;
          await cache.close();
        },
      };
    }
  }

  it("steps every batch through its cache's forward, reports its bytes and closes it", async () => {
    const backend = new RecordingBackend();
    const engine = await Engine.load(join(dir, 'pre-f32'), { backend });
    const run = engine.startBatch(2);
    await run.step([[2, 17, 250], [1, 2, 5]], [[1, 1, 1], [0, 1, 1]]);
    await run.step([[9], [10]], [[1], [1]]);
    expect(backend.steps).toEqual([[2, 3, 0], [2, 1, 3]]);
    // float32 K and V of 2 layers, 2 rows, 4 tokens, hidden 32.
    expect(run.kvBytes).toBe(2 * 4 * 2 * 2 * 4 * 32);
    await run.close();
    expect(backend.closed).toBe(1);
    await expect(run.step([[3], [4]], [[1], [1]])).rejects.toThrow(/closed/);
    await engine.close();
  });
});

describe('loading layers while the next one is read', () => {
  /** The reference backend whose load of layer `failAt` fails a turn after it began (as a worker's answer would). */
  class LateFailure extends ReferenceBackend {
    readonly loaded: number[] = [];
    disposed = 0;
    constructor(private readonly failAt: number) {
      super();
    }
    override async loadLayer(index: number, weights: Parameters<ReferenceBackend['loadLayer']>[1]): Promise<void> {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (index === this.failAt) throw new Error(`layer ${index} refused by the backend`);
      this.loaded.push(index);
      return super.loadLayer(index, weights);
    }
    override async dispose(): Promise<void> {
      this.disposed++;
      await super.dispose();
    }
  }

  it('a load failing while the next layer is read is the error of the load, not an unhandled rejection', async () => {
    const backend = new LateFailure(0);
    await expect(Engine.load(join(dir, 'pre-f32'), { backend })).rejects.toThrow('layer 0 refused by the backend');
    expect(backend.loaded).toEqual([]);
    expect(backend.disposed).toBe(1);
    const last = new LateFailure(1);
    await expect(Engine.load(join(dir, 'pre-f32'), { backend: last })).rejects.toThrow('layer 1 refused by the backend');
    expect(last.loaded).toEqual([0]);
  });
});
