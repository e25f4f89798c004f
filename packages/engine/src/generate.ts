import { z } from 'zod';
import type { OptConfig } from './opt-config.js';
import type { BatchRun, OptEngine } from './opt-engine.js';
import { argmax, logSumExp, processedLogits, sampleToken, topK } from './sampling.js';
import { SeededUniform } from './random-weights.js';

/** One generation request on token ids. Each request keeps its own settings inside a shared batch. */
export interface GenerationRequest {
  /** Prompt token ids (for OPT, starting with bos `</s>` = 2 as the Hugging Face tokenizer adds it). */
  prompt: number[];
  /** New tokens to generate (0 with `echoPrompt` scores the prompt only). Default 16. */
  maxNewTokens?: number;
  /** 0 = greedy (default). */
  temperature?: number;
  /** Nucleus sampling, default 1 (off). */
  topP?: number;
  /** Top-k sampling, default 0 (off). */
  topK?: number;
  /** Completions per prompt, default 1. */
  n?: number;
  /** Seed for sampling; completion i uses seed + i. Default 0. */
  seed?: number;
  /** Text stop sequences (need `decode`); generation of a completion ends once its text contains one. */
  stopSequences?: string[];
  /** Stop at the eos token (default true). */
  stopAtEos?: boolean;
  /**
   * More token ids that end a completion like eos does (`finishReason: 'eos'`, the token kept as the last one): a chat
   * model's end-of-turn tokens (`<|eot_id|>`, `<|im_end|>`) and the extra eos ids of `generation_config.json`.
   */
  stopTokenIds?: number[];
  /** Also return the prompt tokens with their logprobs. */
  echoPrompt?: boolean;
  /** How many top alternatives (id → logprob) to report per position (HELM's top_k_per_token). Default 0. */
  topLogprobs?: number;
  /**
   * Which distribution generated-token logprobs come from: `raw` (default) = log-softmax of the model's logits, as
   * OpenAI-style APIs and the conformance golden data report; `processed` = after temperature / top-k / top-p, as
   * Hugging Face's `output_scores` (and so HELM 0.2.1's huggingface client) report. Prompt tokens are always raw.
   */
  logprobs?: 'raw' | 'processed';
}

export interface ScoredToken {
  id: number;
  /** log p(token | everything before) (see `GenerationRequest.logprobs`); `null` for the first prompt token (nothing predicts it). */
  logprob: number | null;
  /** The `topLogprobs` most likely tokens at this position, highest first. */
  top: { id: number; logprob: number }[];
}

export interface Completion {
  /** Generated tokens (including the eos or stop-completing token, if any). */
  tokens: ScoredToken[];
  /** Prompt tokens with their logprobs when `echoPrompt`. */
  promptTokens?: ScoredToken[];
  /** Sum of the generated tokens' logprobs. */
  sumLogprob: number;
  finishReason: 'length' | 'eos' | 'stop';
  /** The stop sequence that ended generation. */
  stopSequence?: string;
}

/**
 * One forward batch of `generate` (reported through `GenerateOptions.onBatch`): the rows (prompt × completion) that
 * shared its prefill and decode passes, as `[request index, completion index]`, and its wall time.
 */
export interface ForwardBatch {
  rows: [request: number, completion: number][];
  seconds: number;
}

export interface GenerationResult {
  request: GenerationRequest;
  completions: Completion[];
}

export interface GenerateOptions {
  /** Token ids → text, needed for stop sequences. */
  decode?: (ids: number[]) => string;
  /** Rows (prompt × completion) per forward batch. Default 8. */
  maxBatchSize?: number;
  /** Prompt positions scored per head call when echoing (bounds memory: rows × vocab floats). Default 256. */
  headChunk?: number;
  /**
   * Hears each forward batch once it finished: which rows it held and its wall time (timings stay out of the results,
   * so the same requests always give equal results).
   */
  onBatch?: (batch: ForwardBatch) => void;
  /** Filled with where the time went (milliseconds and token counts, summed over batches). */
  timings?: GenerationTimings;
  /**
   * Left-pad every batch to at least this many prompt positions (FlexLLMGen's fixed prompt shape, helm_run.py's
   * `--pad-to-seq-len`). Padding is masked and positions count real tokens only, so results do not change; a prompt
   * longer than this is an error, as in helm_run.py.
   */
  padTo?: number;
}

/** Wall time of the prefill (prompt forward + first logits) and of the decode steps. */
export interface GenerationTimings {
  prefillMs: number;
  /** Prompt tokens fed, padding included. */
  prefillTokens: number;
  decodeMs: number;
  /** Tokens fed in decode steps (rows × steps). */
  decodeTokens: number;
}

const RequestSchema = z.object({
  prompt: z.array(z.number().int().nonnegative()).min(1, 'prompt must hold at least one token id'),
  maxNewTokens: z.number().int().nonnegative().optional(),
  temperature: z.number().nonnegative().optional(),
  topP: z.number().gt(0).lte(1).optional(),
  topK: z.number().int().nonnegative().optional(),
  n: z.number().int().positive().optional(),
  seed: z.number().int().optional(),
  stopSequences: z.array(z.string().min(1, 'stop sequences must not be empty')).optional(),
  stopAtEos: z.boolean().optional(),
  stopTokenIds: z.array(z.number().int().nonnegative()).optional(),
  echoPrompt: z.boolean().optional(),
  topLogprobs: z.number().int().nonnegative().optional(),
  logprobs: z.enum(['raw', 'processed']).optional(),
});

interface Row {
  request: number;
  completion: number;
  prompt: number[];
  maxNew: number;
  rng: SeededUniform;
  temperature: number;
  topP: number;
  topK: number;
  topLogprobs: number;
  stops: string[];
  stopAtEos: boolean;
  stopIds: ReadonlySet<number>;
  echo: boolean;
  processed: boolean;
  out: Completion;
  done: boolean;
}

function scored(id: number, logits: Float32Array, lse: number, k: number): ScoredToken {
  return { id, logprob: logits[id]! - lse, top: topK(logits, k).map((t) => ({ id: t.id, logprob: t.value - lse })) };
}

/**
 * Generates completions for many requests: rows are grouped by prompt length into batches of up to `maxBatchSize`,
 * left-padded, prefilled once, then decoded token by token with the KV cache until every row finished.
 */
export async function generate(engine: OptEngine, requests: GenerationRequest[], options: GenerateOptions = {}): Promise<GenerationResult[]> {
  const c = engine.config;
  const results: GenerationResult[] = requests.map((request, i) => {
    const parsed = RequestSchema.safeParse(request);
    if (!parsed.success) {
      throw new Error(`request ${i} is invalid: ${parsed.error.issues.map((x) => `${x.path.join('.') || '(root)'}: ${x.message}`).join('; ')}`);
    }
    if ((request.stopSequences?.length ?? 0) > 0 && !options.decode) throw new Error(`request ${i} has stop sequences, which need options.decode (token ids → text)`);
    const total = request.prompt.length + (request.maxNewTokens ?? 16);
    if (total > c.maxPositionEmbeddings) {
      throw new Error(`request ${i}: prompt (${request.prompt.length} tokens) + max_new_tokens (${request.maxNewTokens ?? 16}) exceeds ${c.name}'s ${c.maxPositionEmbeddings} positions`);
    }
    if (options.padTo !== undefined && request.prompt.length > options.padTo) {
      throw new Error(`request ${i}: prompt (${request.prompt.length} tokens) is longer than padTo (${options.padTo})`);
    }
    for (const id of request.prompt) if (id >= c.vocabSize) throw new Error(`request ${i}: token id ${id} is outside the vocabulary 0..${c.vocabSize - 1}`);
    return { request, completions: [] };
  });
  const rows: Row[] = [];
  requests.forEach((r, ri) => {
    for (let ci = 0; ci < (r.n ?? 1); ci++) {
      rows.push({
        request: ri,
        completion: ci,
        prompt: r.prompt,
        maxNew: r.maxNewTokens ?? 16,
        rng: new SeededUniform(((r.seed ?? 0) + ci) * 2654435761 + 1),
        temperature: r.temperature ?? 0,
        topP: r.topP ?? 1,
        topK: r.topK ?? 0,
        topLogprobs: r.topLogprobs ?? 0,
        stops: r.stopSequences ?? [],
        stopAtEos: r.stopAtEos ?? true,
        stopIds: new Set(r.stopTokenIds ?? []),
        echo: r.echoPrompt ?? false,
        processed: r.logprobs === 'processed',
        out: { tokens: [], sumLogprob: 0, finishReason: 'length' },
        done: false,
      });
    }
  });
  // Similar lengths together means less padding; rows that want nothing (no new tokens, no echo) need no forward pass.
  const order = rows.filter((r) => r.maxNew > 0 || r.echo).sort((a, b) => a.prompt.length - b.prompt.length);
  const maxBatch = Math.max(1, options.maxBatchSize ?? 8);
  for (let i = 0; i < order.length; i += maxBatch) await runBatch(engine, order.slice(i, i + maxBatch), options);
  for (const row of rows) results[row.request]!.completions[row.completion] = row.out;
  return results;
}

async function runBatch(engine: OptEngine, rows: Row[], options: GenerateOptions): Promise<void> {
  const c = engine.config;
  const B = rows.length;
  const L = Math.max(options.padTo ?? 0, ...rows.map((r) => r.prompt.length));
  const ids = rows.map((r) => [...Array<number>(L - r.prompt.length).fill(c.padTokenId), ...r.prompt]);
  const mask = rows.map((r) => [...Array<number>(L - r.prompt.length).fill(0), ...Array<number>(r.prompt.length).fill(1)]);
  const started = performance.now();
  const run = engine.startBatch(B);
  try {
    await generateRows(engine.config, run, rows, ids, mask, L, options, started);
  } finally {
    // Frees the batch's KV cache now (a backend may hold it in its worker) rather than at garbage collection.
    await run.close();
  }
  options.onBatch?.({ rows: rows.map((r) => [r.request, r.completion]), seconds: (performance.now() - started) / 1000 });
}

async function generateRows(c: OptConfig, run: BatchRun, rows: Row[], ids: number[][], mask: number[][], L: number, options: GenerateOptions, prefillStart: number): Promise<void> {
  let started = prefillStart;
  const B = rows.length;
  const timings = options.timings;
  const hidden = await run.step(ids, mask);

  // Echo: score every prompt token from the logits at the previous position (chunked, so the logits stay small).
  const echoPicks: { row: number; pos: number }[] = [];
  rows.forEach((r, b) => {
    if (!r.echo) return;
    r.out.promptTokens = [{ id: r.prompt[0]!, logprob: null, top: [] }];
    for (let j = 1; j < r.prompt.length; j++) echoPicks.push({ row: b, pos: L - r.prompt.length + j - 1 });
  });
  const chunk = Math.max(1, options.headChunk ?? 256);
  for (let i = 0; i < echoPicks.length; i += chunk) {
    const picks = echoPicks.slice(i, i + chunk);
    const logits = await run.logits(hidden, L, picks);
    picks.forEach((p, k) => {
      const row = rows[p.row]!;
      const l = logits.subarray(k * c.vocabSize, (k + 1) * c.vocabSize);
      const next = row.prompt[p.pos - (L - row.prompt.length) + 1]!;
      row.out.promptTokens!.push(scored(next, l, logSumExp(l), row.topLogprobs));
    });
  }

  for (const r of rows) if (r.maxNew === 0) r.done = true;
  const finishPrefill = () => {
    if (!timings) return;
    timings.prefillMs += performance.now() - started;
    timings.prefillTokens += B * L;
    started = performance.now();
  };
  if (rows.every((r) => r.done)) return finishPrefill();
  let logits = await run.logits(hidden, L, rows.map((_, b) => ({ row: b, pos: L - 1 })));
  finishPrefill();
  const maxSteps = Math.max(...rows.map((r) => r.maxNew));
  for (let s = 0; s < maxSteps; s++) {
    const next: number[][] = [];
    // Finished rows are fed masked padding: it keeps their positions (and the table) in range while others go on.
    const nextMask = rows.map((r) => [r.done ? 0 : 1]);
    rows.forEach((r, b) => {
      if (r.done) {
        next.push([c.padTokenId]);
        return;
      }
      const l = logits.subarray(b * c.vocabSize, (b + 1) * c.vocabSize);
      const id = r.temperature < 1e-5 ? argmax(l) : sampleToken(l, r, r.rng);
      const dist = r.processed ? processedLogits(l, r) : l;
      const tok = scored(id, dist, logSumExp(dist), r.topLogprobs);
      r.out.tokens.push(tok);
      r.out.sumLogprob += tok.logprob!;
      if ((r.stopAtEos && id === c.eosTokenId) || r.stopIds.has(id)) {
        r.done = true;
        r.out.finishReason = 'eos';
      } else if (r.stops.length) {
        const text = options.decode!(r.out.tokens.map((t) => t.id));
        const hit = r.stops.find((stop) => text.includes(stop));
        if (hit !== undefined) {
          r.done = true;
          r.out.finishReason = 'stop';
          r.out.stopSequence = hit;
        }
      }
      if (!r.done && r.out.tokens.length >= r.maxNew) r.done = true;
      next.push([id]);
    });
    if (rows.every((r) => r.done)) break;
    const h = await run.step(next, nextMask);
    logits = await run.logits(h, 1, rows.map((_, b) => ({ row: b, pos: 0 })));
    if (timings) timings.decodeTokens += B;
  }
  if (timings) timings.decodeMs += performance.now() - started;
}
