import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { generate, logSumExp, Engine, ropeInvFreq } from '@flexhelm/engine';
import { CaseRecorder, type CheckResult } from '../check-result.js';
import { checkOneDnnBf16 } from './llama-onednn.js';
import { compareRecord, LOGPROB_TOL, type GreedyRecord, type LogitRecord } from './logit-record.js';

interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: (LogitRecord | null)[][];
  echo: { prompt_token_logprobs: (number | null)[][] };
  greedy: GreedyRecord;
  derived: { head_dim: number; num_key_value_groups: number; rope_inv_freq: number[]; sliding_window_active: boolean; output_projection: string };
}

/** Every dtype folder check.md describes; the ones present beside golden.json are checked. */
const FOLDERS = ['f32', 'f16', 'bf16', 'bf16-sharded'];

function row(all: Float32Array, i: number, vocab: number): Float32Array {
  return all.subarray(i * vocab, (i + 1) * vocab);
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** First difference of two id lists, for messages. */
function sameIds(golden: number[], got: number[]): string | undefined {
  return got.join(',') === golden.join(',') ? undefined : `got ${JSON.stringify(got)}, golden ${JSON.stringify(golden)}`;
}

async function checkFolder(rec: CaseRecorder, g: Golden, modelDir: string, label: string, backend: 'reference' | 'onnxruntime'): Promise<void> {
  let engine: Engine;
  try {
    engine = await Engine.load(modelDir, { backend });
  } catch (err) {
    rec.fail(`${label}/load`, `could not load ${modelDir}: ${(err as Error).message}`);
    return;
  }
  rec.pass();
  try {
    await runCases(rec, g, engine, label);
  } finally {
    await engine.close();
  }
}

async function runCases(rec: CaseRecorder, g: Golden, engine: Engine, label: string): Promise<void> {
  const d = engine.description;
  const V = d.vocabSize;
  const B = g.prompts.length;
  const L = g.input_ids[0]!.length;
  const steps = g.greedy.max_new_tokens;

  // 0. what the description derived from config.json
  await rec.check(`${label}/derived`, () => {
    const rope = d.positions.kind === 'rope' ? d.positions : undefined;
    const inv = rope ? ropeInvFreq(d.attention.headDim, rope.theta, rope.scaling) : new Float32Array(0);
    const problems: string[] = [];
    if (d.attention.headDim !== g.derived.head_dim) problems.push(`head_dim ${d.attention.headDim}, golden ${g.derived.head_dim}`);
    if (d.attention.heads / d.attention.kvHeads !== g.derived.num_key_value_groups) problems.push(`${d.attention.heads / d.attention.kvHeads} query heads per kv head, golden ${g.derived.num_key_value_groups}`);
    g.derived.rope_inv_freq.forEach((f, i) => {
      if (!(Math.abs(f - inv[i]!) <= 1e-6 * Math.abs(f))) problems.push(`rope inv_freq[${i}] ${inv[i]}, golden ${f}`);
    });
    if ((d.attention.slidingWindow !== undefined) !== g.derived.sliding_window_active) problems.push(`sliding window ${d.attention.slidingWindow ?? 'off'}, golden active: ${g.derived.sliding_window_active}`);
    const head = d.checkpointNames?.head ?? d.checkpointNames?.embedding;
    if (head !== g.derived.output_projection) problems.push(`output projection ${head}, golden ${g.derived.output_projection}`);
    return problems.length ? problems.join('; ') : undefined;
  });

  // 1. prompt logits of the padded batch (no cache), every real position
  const prompt = await engine.forwardLogits(g.input_ids, g.attention_mask);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < L; t++) {
      const r = g.prompt_logits[b]![t];
      if (r) await rec.check(`${label}/prompt_logits[${b}][${t}]`, () => compareRecord(r, row(prompt, b * L + t, V)));
    }
  }

  // 2. each prompt alone, unpadded
  for (let b = 0; b < B; b++) {
    const p = g.prompts[b]!;
    const alone = await engine.forwardLogits([p], [p.map(() => 1)]);
    await rec.check(`${label}/unpadded[${b}]`, () => {
      for (let j = 0; j < p.length; j++) {
        const problem = compareRecord(g.prompt_logits[b]![L - p.length + j]!, row(alone, j, V));
        if (problem) return `position ${j}: ${problem}`;
      }
      return undefined;
    });
  }

  // 3. generate(): greedy with echo, as the runner and the server call it (left-padded to L like the golden batch)
  const generated = await generate(
    engine,
    g.prompts.map((prompt) => ({ prompt, maxNewTokens: steps, temperature: 0, echoPrompt: true, stopAtEos: false })),
    { maxBatchSize: B, padTo: L },
  );
  for (let b = 0; b < B; b++) {
    const c = generated[b]!.completions[0]!;
    await rec.check(`${label}/generate.echo[${b}]`, () => {
      const p = g.prompts[b]!;
      const golden = g.echo.prompt_token_logprobs[b]!;
      const echo = c.promptTokens ?? [];
      if (golden.length !== p.length || echo.length !== p.length) return `golden has ${golden.length} log-probs, generate ${echo.length}, for ${p.length} tokens`;
      for (let j = 1; j < p.length; j++) {
        const lp = echo[j]!.logprob!;
        if (!(Math.abs(lp - golden[j]!) <= LOGPROB_TOL)) return `token ${j}: logprob ${lp}, golden ${golden[j]}`;
      }
      return golden[0] === null && echo[0]!.logprob === null ? undefined : `echo[0] is ${echo[0]!.logprob} (golden ${golden[0]}), expected null`;
    });
    await rec.check(`${label}/generate.greedy[${b}]`, () => {
      const problem = sameIds(g.greedy.generated_ids[b]!, c.tokens.map((t) => t.id));
      if (problem) return problem;
      for (let s = 0; s < steps; s++) {
        if (!(Math.abs(c.tokens[s]!.logprob! - g.greedy.token_logprobs[b]![s]!) <= LOGPROB_TOL)) return `step ${s}: ${c.tokens[s]!.logprob}, golden ${g.greedy.token_logprobs[b]![s]}`;
      }
      return undefined;
    });
  }

  // 3b. echo: log p(prompt[j] | prompt[:j]) from the padded prompt forward
  for (let b = 0; b < B; b++) {
    await rec.check(`${label}/echo.prompt_token_logprobs[${b}]`, () => {
      const p = g.prompts[b]!;
      const golden = g.echo.prompt_token_logprobs[b]!;
      if (golden.length !== p.length) return `golden has ${golden.length} log-probs for ${p.length} tokens`;
      for (let j = 1; j < p.length; j++) {
        const logits = row(prompt, b * L + L - p.length + j - 1, V);
        const lp = logits[p[j]!]! - logSumExp(logits);
        if (!(Math.abs(lp - golden[j]!) <= LOGPROB_TOL)) return `token ${j}: logprob ${lp}, golden ${golden[j]}`;
      }
      return golden[0] === null ? undefined : `golden echo[0] is ${golden[0]}, expected null`;
    });
  }

  // 4. greedy with the KV cache: the model's own argmax each step (ids exact), step logits, token log-probs
  const run = engine.startBatch(B);
  let logits = await run.stepLogits(g.input_ids, g.attention_mask);
  let last = g.prompts.map((_, b) => row(logits, b * L + L - 1, V).slice());
  const got: number[][] = g.prompts.map(() => []);
  const lps: number[][] = g.prompts.map(() => []);
  const stepLogits: Float32Array[][] = g.prompts.map(() => []);
  for (let s = 0; s < steps; s++) {
    for (let b = 0; b < B; b++) {
      const id = argmax(last[b]!);
      got[b]!.push(id);
      lps[b]!.push(last[b]![id]! - logSumExp(last[b]!));
      stepLogits[b]!.push(last[b]!);
    }
    if (s === steps - 1) break;
    logits = await run.stepLogits(got.map((ids) => [ids[s]!]), g.prompts.map(() => [1]));
    last = g.prompts.map((_, b) => row(logits, b, V).slice());
  }
  await run.close();
  for (let b = 0; b < B; b++) {
    await rec.check(`${label}/greedy.generated_ids[${b}]`, () => sameIds(g.greedy.generated_ids[b]!, got[b]!));
    for (let s = 0; s < steps; s++) {
      await rec.check(`${label}/greedy.step_logits[${b}][${s}]`, () => compareRecord(g.greedy.step_logits[b]![s]!, stepLogits[b]![s]!));
    }
    await rec.check(`${label}/greedy.token_logprobs[${b}]`, () => {
      for (let s = 0; s < steps; s++) {
        if (!(Math.abs(lps[b]![s]! - g.greedy.token_logprobs[b]![s]!) <= LOGPROB_TOL)) return `step ${s}: ${lps[b]![s]}, golden ${g.greedy.token_logprobs[b]![s]}`;
      }
      const sum = lps[b]!.reduce((x, y) => x + y, 0);
      return Math.abs(sum - g.greedy.sum_logprob[b]!) <= LOGPROB_TOL * steps ? undefined : `sum_logprob ${sum} vs ${g.greedy.sum_logprob[b]}`;
    });
  }

  // 5. cache consistency: a no-cache forward over the full sequences reproduces the step logits (sliding window!)
  const T = L + steps;
  const full = await engine.forwardLogits(g.greedy.sequences, g.attention_mask.map((m) => [...m, ...Array<number>(steps).fill(1)]));
  for (let b = 0; b < B; b++) {
    await rec.check(`${label}/no_cache_step_logits[${b}]`, () => {
      for (let s = 0; s < steps; s++) {
        const problem = compareRecord(g.greedy.step_logits[b]![s]!, row(full, b * T + L - 1 + s, V));
        if (problem) return `step ${s}: ${problem}`;
      }
      return undefined;
    });
  }
}

/**
 * Checks `llama/<model>/golden.json` (llama/check.md) through the engine (`Engine` with the reference and the
 * onnxruntime backends, its `BatchRun` steps and `generate`; onnxruntime's counts on a summary line per folder) over every dtype folder beside it (F32, F16, BF16 and the sharded BF16 checkpoint all upcast to float32), at the float32 tolerances;
 * then the BF16 folder on the oneDNN backend computing in bf16 (`llama-onednn.ts`, check.md's bf16 row), with its summary line.
 */
export async function check(path: string): Promise<CheckResult> {
  const g = JSON.parse(readFileSync(path, 'utf8')) as Golden;
  const dir = dirname(path);
  const rec = new CaseRecorder();
  for (const folder of FOLDERS) {
    const modelDir = join(dir, folder);
    if (!existsSync(modelDir)) continue;
    await checkFolder(rec, g, modelDir, `${folder}/reference`, 'reference');
    // The same cases on the onnxruntime graphs (float32, the same tolerances), with a summary line of their own.
    const [passed, failed] = [rec.passed, rec.failed];
    await checkFolder(rec, g, modelDir, `${folder}/onnxruntime`, 'onnxruntime');
    rec.note(`${folder}/onnxruntime: ${rec.passed - passed} passed, ${rec.failed - failed} failed`);
  }
  // The bf16 checkpoint on the oneDNN backend computing in bf16, at check.md's bf16 tolerance.
  const bf16 = join(dir, 'bf16');
  if (existsSync(bf16)) rec.note(await checkOneDnnBf16(rec, g, bf16, 'bf16/onednn-bf16'));
  return rec.result();
}
