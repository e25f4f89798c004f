import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { generate, isSparseLayer, layerHasWindow, logSumExp, Engine, ropeInvFreq, type ModelDescription } from '@flexhelm/engine';
import { CaseRecorder, type CheckResult } from '../check-result.js';
import { isKindRefusal } from './kind-refusal.js';
import { checkOneDnnBf16 } from './llama-onednn.js';
import { RouteRecorder, type GoldenRouting } from './moe-routing.js';
import { compareRecord, LOGPROB_TOL, type GreedyRecord, type LogitRecord } from './logit-record.js';
import { OrtBackend } from '@flexhelm/ort-backend';

export interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: (LogitRecord | null)[][];
  echo: { prompt_token_logprobs: (number | null)[][] };
  greedy: GreedyRecord;
  derived: {
    head_dim: number;
    num_key_value_groups: number;
    rope_inv_freq: number[];
    sliding_window_active: boolean;
    output_projection: string;
    // The families' extras (families/, check.md's later sections); absent for llama/.
    rope_inv_freq_short?: number[];
    rope_inv_freq_long?: number[];
    longrope_factor_set_used?: 'short' | 'long';
    rope_cos_sin_scaling?: number;
    sliding_window_layers?: number[];
    embedding_scale?: number;
    attention_scaling?: number;
    attn_logit_softcapping?: number;
    final_logit_softcapping?: number;
    /** Mixtures of experts: the layers with the sparse MLP, and the dense ones. */
    sparse_moe_layers?: number[];
    dense_mlp_layers?: number[];
    /** Per sparse layer, over the real positions of the no-cache forward of `greedy.sequences`. */
    routing?: Record<string, GoldenRouting>;
  };
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

/** Where the description disagrees with golden.json's `derived` (llama/ fields, and the families' when present). */
function derivedProblems(d: ModelDescription, g: Golden['derived']): string[] {
  const problems: string[] = [];
  const rope = d.positions.kind === 'rope' ? d.positions : undefined;
  const longrope = rope?.scaling?.kind === 'longrope' ? rope.scaling : undefined;
  // longrope's factor set depends on the call's key count: one past originalMaxPositions selects the long set.
  const invAt = (keys: number) => (rope ? ropeInvFreq(d.attention.headDim, rope.theta, rope.scaling, keys) : new Float32Array(0));
  const longKeys = longrope ? longrope.originalMaxPositions + 1 : 0;
  const sets: [string, number[] | undefined, Float32Array][] = [
    ['rope inv_freq', g.rope_inv_freq, invAt(g.longrope_factor_set_used === 'long' ? longKeys : 0)],
    ['rope inv_freq (short factors)', g.rope_inv_freq_short, invAt(0)],
    ['rope inv_freq (long factors)', g.rope_inv_freq_long, invAt(longKeys)],
  ];
  for (const [what, golden, got] of sets) {
    golden?.forEach((f, i) => {
      if (!(Math.abs(f - got[i]!) <= 1e-6 * Math.abs(f))) problems.push(`${what}[${i}] ${got[i]}, golden ${f}`);
    });
  }
  const near = (what: string, got: number | undefined, golden: number | undefined) => {
    if (golden !== undefined && !(got !== undefined && Math.abs(got - golden) <= 1e-6 * Math.abs(golden))) problems.push(`${what} ${got ?? 'none'}, golden ${golden}`);
  };
  if (d.attention.headDim !== g.head_dim) problems.push(`head_dim ${d.attention.headDim}, golden ${g.head_dim}`);
  if (d.attention.heads / d.attention.kvHeads !== g.num_key_value_groups) problems.push(`${d.attention.heads / d.attention.kvHeads} query heads per kv head, golden ${g.num_key_value_groups}`);
  if ((d.attention.slidingWindow !== undefined) !== g.sliding_window_active) problems.push(`sliding window ${d.attention.slidingWindow ?? 'off'}, golden active: ${g.sliding_window_active}`);
  if (g.sliding_window_layers) {
    const layers = Array.from({ length: d.layers }, (_, i) => i).filter((i) => layerHasWindow(d, i));
    if (layers.join(',') !== g.sliding_window_layers.join(',')) problems.push(`window on layers [${layers}], golden [${g.sliding_window_layers}]`);
  }
  const layers = Array.from({ length: d.layers }, (_, i) => i);
  const sparse = layers.filter((i) => isSparseLayer(d, i));
  if (g.sparse_moe_layers && sparse.join(',') !== g.sparse_moe_layers.join(',')) problems.push(`sparse MoE layers [${sparse}], golden [${g.sparse_moe_layers}]`);
  const dense = layers.filter((i) => !isSparseLayer(d, i));
  if (g.dense_mlp_layers && dense.join(',') !== g.dense_mlp_layers.join(',')) problems.push(`dense MLP layers [${dense}], golden [${g.dense_mlp_layers}]`);
  near('rope cos/sin scaling', longrope?.cosSinScale ?? (g.rope_cos_sin_scaling === undefined ? undefined : 1), g.rope_cos_sin_scaling);
  // The embedding factor is rounded to the compute dtype (float32 here) before it multiplies.
  near('embedding scale', d.embedding.scale === undefined ? undefined : Math.fround(d.embedding.scale), g.embedding_scale);
  near('attention scaling', d.attention.scale ?? d.attention.headDim ** -0.5, g.attention_scaling);
  near('attention soft-cap', d.attention.logitSoftcap, g.attn_logit_softcapping);
  near('final soft-cap', d.finalLogitSoftcap, g.final_logit_softcapping);
  // A tied head is the embedding's tensor followed by " (tied)" (check.md).
  const names = d.checkpointNames;
  const head = names?.head ?? (names ? `${names.embedding} (tied)` : undefined);
  if (head !== g.output_projection) problems.push(`output projection ${head}, golden ${g.output_projection}`);
  return problems;
}

async function checkFolder(rec: CaseRecorder, g: Golden, modelDir: string, label: string, backend: 'reference' | 'onnxruntime'): Promise<void> {
  let engine: Engine;
  // On the reference, a mixture of experts' routes are recorded for `derived.routing` (case 6).
  const routes = backend === 'reference' && g.derived.routing ? new RouteRecorder() : undefined;
  try {
    engine = await Engine.load(modelDir, { backend: routes?.backend ?? (backend === 'onnxruntime' ? new OrtBackend() : backend) });
  } catch (err) {
    const message = (err as Error).message;
    // A backend that does not compute one of the model's kinds yet says so at init (requireKinds): not a failure.
    if (isKindRefusal(message)) rec.note(`${label}: not implemented on ${backend} (${message})`);
    else rec.fail(`${label}/load`, `could not load ${modelDir}: ${message}`);
    return;
  }
  rec.pass();
  try {
    await runCases(rec, g, engine, label, routes);
  } finally {
    await engine.close();
  }
}

async function runCases(rec: CaseRecorder, g: Golden, engine: Engine, label: string, routes?: RouteRecorder): Promise<void> {
  const d = engine.description;
  const V = d.vocabSize;
  const B = g.prompts.length;
  const L = g.input_ids[0]!.length;
  const steps = g.greedy.max_new_tokens;

  // 0. what the description derived from config.json
  await rec.check(`${label}/derived`, () => {
    const problems = derivedProblems(d, g.derived);
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
  const fullMask = g.attention_mask.map((m) => [...m, ...Array<number>(steps).fill(1)]);
  if (routes) routes.recording = true;
  const full = await engine.forwardLogits(g.greedy.sequences, fullMask);
  if (routes) routes.recording = false;
  for (let b = 0; b < B; b++) {
    await rec.check(`${label}/no_cache_step_logits[${b}]`, () => {
      for (let s = 0; s < steps; s++) {
        const problem = compareRecord(g.greedy.step_logits[b]![s]!, row(full, b * T + L - 1 + s, V));
        if (problem) return `step ${s}: ${problem}`;
      }
      return undefined;
    });
  }

  // 6. a mixture of experts' routing over those positions (check.md: expert sets, tokens per expert)
  const routing = g.derived.routing;
  if (routes && routing && d.moe) {
    const experts = d.moe.experts;
    await rec.check(`${label}/derived.routing`, () => routes.problems(routing, fullMask, experts).join('; ') || undefined);
  }
}

/**
 * Checks `llama/<model>/golden.json` (llama/check.md) through the engine (`Engine` with the reference and the
 * onnxruntime backends, its `BatchRun` steps and `generate`; onnxruntime's counts on a summary line per folder) over every dtype folder beside it (F32, F16, BF16 and the sharded BF16 checkpoint all upcast to float32), at the float32 tolerances;
 * then the BF16 folder on the oneDNN backend computing in bf16 (`llama-onednn.ts`, check.md's bf16 row), with its summary line.
 * A backend that does not compute one of the model's kinds yet is noted as "not implemented on <backend>", not failed.
 */
export async function check(path: string): Promise<CheckResult> {
  return checkGolden(JSON.parse(readFileSync(path, 'utf8')) as Golden, dirname(path));
}

/** The checks of `check` for a parsed golden file whose model folders are in `dir` (also used for `families/`). */
export async function checkGolden(g: Golden, dir: string): Promise<CheckResult> {
  const rec = new CaseRecorder();
  for (const folder of FOLDERS) {
    const modelDir = join(dir, folder);
    if (!existsSync(modelDir)) continue;
    await checkFolder(rec, g, modelDir, `${folder}/reference`, 'reference');
    // The same cases on the onnxruntime graphs (float32, the same tolerances), with a summary line of their own.
    const [passed, failed] = [rec.passed, rec.failed];
    await checkFolder(rec, g, modelDir, `${folder}/onnxruntime`, 'onnxruntime');
    // No cases at all: the backend refused the model (its "not implemented" note says so).
    if (rec.passed > passed || rec.failed > failed) rec.note(`${folder}/onnxruntime: ${rec.passed - passed} passed, ${rec.failed - failed} failed`);
  }
  // The bf16 checkpoint on the oneDNN backend computing in bf16, at check.md's bf16 tolerance.
  const bf16 = join(dir, 'bf16');
  if (existsSync(bf16)) rec.note(await checkOneDnnBf16(rec, g, bf16, 'bf16/onednn-bf16'));
  return rec.result();
}
