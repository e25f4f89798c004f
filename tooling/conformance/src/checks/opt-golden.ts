import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { generate, Engine, type BatchRun } from '@flexhelm/engine';
import { CaseRecorder, type CheckResult } from '../check-result.js';
import { compareRecord as compareLogits, LOGIT_TOL, LOGPROB_TOL, maxDiff, type GreedyRecord, type LogitRecord } from './logit-record.js';
import { OrtBackend } from '@flexhelm/ort-backend';

/** Compares one stored logits record with computed logits (the sparse layout's fixed ids from `g`). */
function compareRecord(rec: LogitRecord, logits: Float32Array, g: Golden): string | undefined {
  return compareLogits(rec, logits, g.fixed_token_ids);
}

interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  logits_layout: 'full' | 'sparse';
  fixed_token_ids?: number[];
  prompt_logits: (LogitRecord | null)[][];
  prompt_last_logits_full?: number[][];
  echo: { prompt_token_logprobs: (number | null)[][] };
  greedy: GreedyRecord;
  weights?: { folders?: Record<string, string> };
}

function rowLogits(all: Float32Array, i: number, vocab: number): Float32Array {
  return all.subarray(i * vocab, (i + 1) * vocab);
}

/** Full (no-cache) forward of a left-padded batch: logits for every real position, keyed `b:t`. */
async function forwardAll(engine: Engine, ids: number[][], mask: number[][]): Promise<Map<string, Float32Array>> {
  const run: BatchRun = engine.startBatch(ids.length);
  const L = ids[0]!.length;
  const hidden = await run.step(ids, mask);
  const picks: { row: number; pos: number }[] = [];
  mask.forEach((m, b) => {
    m.forEach((v, t) => {
      if (v) picks.push({ row: b, pos: t });
    });
  });
  const logits = await run.logits(hidden, L, picks);
  const out = new Map<string, Float32Array>();
  picks.forEach((p, i) => { out.set(`${p.row}:${p.pos}`, rowLogits(logits, i, engine.description.vocabSize).slice()); });
  return out;
}

async function checkVariant(rec: CaseRecorder, g: Golden, modelDir: string, label: string, backend: 'onnxruntime' | 'reference'): Promise<void> {
  let engine: Engine | undefined;
  const caseNames = enumerateCases(g).map((n) => `${label}/${n}`);
  try {
    engine = await Engine.load(modelDir, { backend: backend === 'onnxruntime' ? new OrtBackend() : backend });
  } catch (err) {
    rec.fail(`${label}/load`, `could not load ${modelDir}: ${(err as Error).message}`);
    for (const n of caseNames) rec.fail(n, 'model did not load');
    return;
  }
  rec.pass();
  try {
    const e = engine;
    const V = e.description.vocabSize;
    const L = g.input_ids[0]!.length;
    const B = g.prompts.length;

    // 1. prompt logits of the padded batch, every real position
    const batch = await forwardAll(e, g.input_ids, g.attention_mask);
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < L; t++) {
        const r = g.prompt_logits[b]![t];
        if (!r) continue;
        await rec.check(`${label}/prompt_logits[${b}][${t}]`, () => compareRecord(r, batch.get(`${b}:${t}`)!, g));
      }
      if (g.prompt_last_logits_full) {
        await rec.check(`${label}/prompt_last_logits_full[${b}]`, () => {
          const { diff, at } = maxDiff(g.prompt_last_logits_full![b]!, batch.get(`${b}:${L - 1}`)!);
          return diff > LOGIT_TOL ? `logit of token ${at} off by ${diff.toExponential(2)}` : undefined;
        });
      }
    }

    // 2. each prompt alone, unpadded, gives the same numbers
    for (let b = 0; b < B; b++) {
      await rec.check(`${label}/unpadded[${b}]`, async () => {
        const p = g.prompts[b]!;
        const alone = await forwardAll(e, [p], [p.map(() => 1)]);
        for (let j = 0; j < p.length; j++) {
          const problem = compareRecord(g.prompt_logits[b]![L - p.length + j]!, alone.get(`0:${j}`)!, g);
          if (problem) return `position ${j}: ${problem}`;
        }
        return undefined;
      });
    }

    // 3. greedy with the KV cache, step by step (teacher forcing on the golden ids so one miss does not cascade)
    const steps = g.greedy.max_new_tokens;
    const run = e.startBatch(B);
    let hidden = await run.step(g.input_ids, g.attention_mask);
    let logits = await run.logits(hidden, L, g.prompts.map((_, b) => ({ row: b, pos: L - 1 })));
    const stepLogits: Float32Array[][] = g.prompts.map(() => []);
    for (let s = 0; s < steps; s++) {
      for (let b = 0; b < B; b++) stepLogits[b]!.push(rowLogits(logits, b, V).slice());
      if (s === steps - 1) break;
      hidden = await run.step(g.greedy.generated_ids.map((ids) => [ids[s]!]), g.prompts.map(() => [1]));
      logits = await run.logits(hidden, 1, g.prompts.map((_, b) => ({ row: b, pos: 0 })));
    }
    for (let b = 0; b < B; b++) {
      for (let s = 0; s < steps; s++) {
        await rec.check(`${label}/greedy.step_logits[${b}][${s}]`, () => compareRecord(g.greedy.step_logits[b]![s]!, stepLogits[b]![s]!, g));
      }
    }

    // 4. the public generate() API: ids exact, token logprobs, echo logprobs
    const results = await generate(
      e,
      g.prompts.map((prompt) => ({ prompt, maxNewTokens: steps, echoPrompt: true })),
      { maxBatchSize: B },
    );
    for (let b = 0; b < B; b++) {
      const c = results[b]!.completions[0]!;
      await rec.check(`${label}/greedy.generated_ids[${b}]`, () => {
        const got = c.tokens.map((t) => t.id);
        return got.join(',') === g.greedy.generated_ids[b]!.join(',') ? undefined : `generated ${JSON.stringify(got)}, golden ${JSON.stringify(g.greedy.generated_ids[b])}`;
      });
      await rec.check(`${label}/greedy.token_logprobs[${b}]`, () => {
        const { diff, at } = maxDiff(g.greedy.token_logprobs[b]!, c.tokens.map((t) => t.logprob ?? NaN));
        if (diff > LOGPROB_TOL) return `step ${at}: off by ${diff.toExponential(2)}`;
        if (!(Math.abs(c.sumLogprob - g.greedy.sum_logprob[b]!) <= LOGPROB_TOL * steps)) return `sum_logprob ${c.sumLogprob} vs ${g.greedy.sum_logprob[b]}`;
        return undefined;
      });
      await rec.check(`${label}/echo.prompt_token_logprobs[${b}]`, () => {
        const golden = g.echo.prompt_token_logprobs[b]!;
        const got = c.promptTokens ?? [];
        if (got.length !== golden.length) return `${got.length} prompt tokens, golden ${golden.length}`;
        for (let j = 0; j < golden.length; j++) {
          const want = golden[j]!;
          const have = got[j]!.logprob;
          if (want === null || have === null) {
            if (want !== have) return `token ${j}: logprob ${have}, golden ${want}`;
          } else if (!(Math.abs(want - have) <= LOGPROB_TOL)) return `token ${j}: logprob ${have}, golden ${want}`;
        }
        return undefined;
      });
    }

    // 5. cache consistency: a no-cache forward over the full sequences reproduces the step logits
    const seqMask = g.attention_mask.map((m) => [...m, ...Array<number>(steps).fill(1)]);
    const full = await forwardAll(e, g.greedy.sequences, seqMask);
    for (let b = 0; b < B; b++) {
      await rec.check(`${label}/no_cache_step_logits[${b}]`, () => {
        for (let s = 0; s < steps; s++) {
          const problem = compareRecord(g.greedy.step_logits[b]![s]!, full.get(`${b}:${L - 1 + s}`)!, g);
          if (problem) return `step ${s}: ${problem}`;
        }
        return undefined;
      });
    }
  } finally {
    await engine.close();
  }
}

/** Names of the cases after `load`, for counting them as failed when the model does not load. */
function enumerateCases(g: Golden): string[] {
  const names: string[] = [];
  g.prompt_logits.forEach((row, b) => {
    row.forEach((r, t) => {
      if (r) names.push(`prompt_logits[${b}][${t}]`);
    });
  });
  if (g.prompt_last_logits_full) g.prompts.forEach((_, b) => { names.push(`prompt_last_logits_full[${b}]`); });
  g.prompts.forEach((_, b) => { names.push(`unpadded[${b}]`); });
  g.prompts.forEach((_, b) => {
    for (let s = 0; s < g.greedy.max_new_tokens; s++) names.push(`greedy.step_logits[${b}][${s}]`);
  });
  for (const what of ['greedy.generated_ids', 'greedy.token_logprobs', 'echo.prompt_token_logprobs', 'no_cache_step_logits']) g.prompts.forEach((_, b) => { names.push(`${what}[${b}]`); });
  return names;
}

/**
 * Checks `opt/<model>/golden.json` (check.md): the F32 and F16 checkpoints beside it through the onnxruntime fp32
 * backend, and the F32 one through the plain-TS reference forward too, all at the float32 tolerances.
 */
export async function check(path: string): Promise<CheckResult> {
  const g = JSON.parse(readFileSync(path, 'utf8')) as Golden;
  const dir = dirname(path);
  const rec = new CaseRecorder();
  const variants: { dtype: string; backend: 'onnxruntime' | 'reference' }[] = [
    { dtype: 'f32', backend: 'onnxruntime' },
    { dtype: 'f16', backend: 'onnxruntime' },
    { dtype: 'f32', backend: 'reference' },
  ];
  for (const v of variants) {
    const modelDir = join(dir, v.dtype);
    // tiny-b ships F16 only; a missing folder is not a case.
    if (!existsSync(modelDir)) continue;
    await checkVariant(rec, g, modelDir, `${v.dtype}/${v.backend}`, v.backend);
  }
  return rec.result();
}
