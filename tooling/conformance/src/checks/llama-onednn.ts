import { logSumExp, Engine } from '@flexhelm/engine';
import { OneDnnBackend, oneDnnStatus } from '@flexhelm/onednn-backend';
import type { CaseRecorder } from '../check-result.js';
import { isKindRefusal } from './kind-refusal.js';
import { compareRecord, type GreedyRecord, type LogitRecord } from './logit-record.js';

/** llama/check.md's bf16-compute tolerance (bf16 activations, f32 accumulation, norms and softmax): logits, logsumexp, log-probs. */
export const BF16_TOL = 0.1;

/** What this check reads of a llama golden.json. */
interface Golden {
  prompts: number[][];
  input_ids: number[][];
  attention_mask: number[][];
  prompt_logits: (LogitRecord | null)[][];
  greedy: GreedyRecord;
}

/** Largest |golden − computed| over a record's full logits and its logsumexp. */
function recordError(rec: LogitRecord, logits: Float32Array): number {
  let m = Math.abs(logSumExp(logits) - rec.logsumexp);
  rec.logits?.forEach((l, i) => {
    m = Math.max(m, Math.abs(l - logits[i]!));
  });
  return m;
}

/**
 * The golden model of `modelDir` on the oneDNN backend computing in bf16 (llama/check.md's bf16 row): the padded
 * prompt's logits at every real position and greedy generation with the KV cache (ids exact, step logits and
 * log-probs within 0.1). Returns the summary line printed under the file (or why it did not run).
 */
export async function checkOneDnnBf16(rec: CaseRecorder, g: Golden, modelDir: string, label: string): Promise<string> {
  const status = oneDnnStatus();
  if (!status.available) {
    rec.notRun(`oneDNN bf16: the oneDNN backend is unavailable (${status.reason})`);
    return `${label}: not run (oneDNN unavailable)`;
  }
  let engine: Engine;
  try {
    engine = await Engine.load(modelDir, { backend: new OneDnnBackend({ dtype: 'bf16' }) });
  } catch (err) {
    const message = (err as Error).message;
    // A kind the backend does not compute yet (requireKinds at init) is reported, not failed.
    if (isKindRefusal(message)) return `${label}: not implemented on onednn (${message})`;
    rec.fail(`${label}/load`, `could not load ${modelDir} on oneDNN bf16: ${message}`);
    return `${label}: load failed`;
  }
  const V = engine.description.vocabSize;
  const B = g.prompts.length;
  const L = g.input_ids[0]!.length;
  let worst = 0;
  let sameIds = 0;
  let ids = 0;
  try {
    const prefill = engine.startBatch(B);
    let logits = await prefill.stepLogits(g.input_ids, g.attention_mask);
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < L; t++) {
        const r = g.prompt_logits[b]![t];
        if (!r) continue;
        const row = logits.subarray((b * L + t) * V, (b * L + t + 1) * V);
        worst = Math.max(worst, recordError(r, row));
        await rec.check(`${label}/prompt_logits[${b}][${t}]`, () => compareRecord(r, row, undefined, BF16_TOL));
      }
    }
    // Greedy with the cache: each step feeds the golden id, so one early difference does not hide the later steps.
    const steps = g.greedy.max_new_tokens;
    let last = g.prompts.map((_, b) => logits.slice((b * L + L - 1) * V, (b * L + L) * V));
    for (let s = 0; s < steps; s++) {
      for (let b = 0; b < B; b++) {
        const golden = g.greedy.generated_ids[b]![s]!;
        const row = last[b]!;
        let best = 0;
        for (let i = 1; i < V; i++) if (row[i]! > row[best]!) best = i;
        ids++;
        if (best === golden) sameIds++;
        worst = Math.max(worst, recordError(g.greedy.step_logits[b]![s]!, row));
        await rec.check(`${label}/greedy[${b}][${s}]`, () => {
          if (best !== golden) return `greedy id ${best}, golden ${golden}`;
          const lp = row[golden]! - logSumExp(row);
          if (!(Math.abs(lp - g.greedy.token_logprobs[b]![s]!) <= BF16_TOL)) return `token logprob ${lp}, golden ${g.greedy.token_logprobs[b]![s]}`;
          return compareRecord(g.greedy.step_logits[b]![s]!, row, undefined, BF16_TOL);
        });
      }
      if (s === steps - 1) break;
      logits = await prefill.stepLogits(g.greedy.generated_ids.map((r) => [r[s]!]), g.prompts.map(() => [1]));
      last = g.prompts.map((_, b) => logits.slice(b * V, (b + 1) * V));
    }
    await prefill.close();
  } catch (err) {
    rec.fail(`${label}/run`, `threw ${(err as Error).message}`);
  } finally {
    await engine.close();
  }
  return `${label}: max |Δlogit| ${worst.toExponential(2)} (tolerance ${BF16_TOL}), greedy ids ${sameIds}/${ids}`;
}
