import { generate, generationTokenIds, type Engine } from '@flexhelm/engine';
import { logitError, type LogitError } from './logit-error.js';

export interface AccuracyReport {
  /** Logit error over every real position of prompt + reference greedy continuation (teacher-forced). */
  logits: LogitError;
  greedy: {
    tokens: number;
    /** Generated tokens equal to the reference's, each completion generating freely. */
    freeRunningAgree: number;
    /** Tokens before each completion's first difference, summed. */
    commonPrefix: number;
    /** Fed the reference's continuation, positions where the candidate's argmax is the reference's token. */
    teacherForcedAgree: number;
  };
}

/** Logits `[rows, vocab]` of every real position of left-padded sequences, in row-major (sequence, position) order. */
async function allLogits(engine: Engine, sequences: number[][]): Promise<Float32Array> {
  const L = Math.max(...sequences.map((s) => s.length));
  const pad = generationTokenIds(engine.description).pad;
  const run = engine.startBatch(sequences.length);
  const hidden = await run.step(
    sequences.map((s) => [...Array<number>(L - s.length).fill(pad), ...s]),
    sequences.map((s) => [...Array<number>(L - s.length).fill(0), ...s.map(() => 1)]),
  );
  const picks = sequences.flatMap((s, row) => s.map((_, j) => ({ row, pos: L - s.length + j })));
  return Float32Array.from(await run.logits(hidden, L, picks));
}

/**
 * Compares a candidate engine with an fp32 reference on the same weights: greedy generation of `newTokens` tokens
 * per prompt (free-running and teacher-forced agreement), and logit error over prompt + continuation.
 */
export async function measureAccuracy(reference: Engine, candidate: Engine, prompts: number[][], options: { newTokens?: number } = {}): Promise<AccuracyReport> {
  const newTokens = options.newTokens ?? 64;
  const requests = prompts.map((prompt) => ({ prompt, maxNewTokens: newTokens, stopAtEos: false }));
  const ids = (results: Awaited<ReturnType<typeof generate>>) => results.map((r) => r.completions[0]!.tokens.map((t) => t.id));
  const refIds = ids(await generate(reference, requests, { maxBatchSize: prompts.length }));
  const candIds = ids(await generate(candidate, requests, { maxBatchSize: prompts.length }));
  let freeRunningAgree = 0;
  let commonPrefix = 0;
  refIds.forEach((ref, i) => {
    const cand = candIds[i]!;
    let prefix = true;
    ref.forEach((id, j) => {
      if (cand[j] === id) {
        freeRunningAgree++;
        if (prefix) commonPrefix++;
      } else prefix = false;
    });
  });
  const sequences = prompts.map((p, i) => [...p, ...refIds[i]!]);
  const V = reference.description.vocabSize;
  const refLogits = await allLogits(reference, sequences);
  const candLogits = await allLogits(candidate, sequences);
  const rows = refLogits.length / V;
  // Teacher forcing: the position before each generated token must predict it.
  let teacherForcedAgree = 0;
  let offset = 0;
  sequences.forEach((s, i) => {
    const promptLen = prompts[i]!.length;
    for (let j = 0; j < refIds[i]!.length; j++) {
      const row = offset + promptLen - 1 + j;
      const l = candLogits.subarray(row * V, (row + 1) * V);
      let best = 0;
      for (let v = 1; v < V; v++) if (l[v]! > l[best]!) best = v;
      if (best === refIds[i]![j]) teacherForcedAgree++;
    }
    offset += s.length;
  });
  return {
    logits: logitError(refLogits, candLogits, rows, V),
    greedy: { tokens: refIds.reduce((a, r) => a + r.length, 0), freeRunningAgree, commonPrefix, teacherForcedAgree },
  };
}
