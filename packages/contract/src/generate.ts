import { z } from 'zod';
import type { Decoder, DecoderBatch } from './decoder.js';
import { generationTokenIds, type ModelDescription } from './model-description.js';
import { jsLogitsMath, type LogitsMath } from './logits-math.js';
import { processedLogits, sampleToken } from './sampling.js';
import { SeededUniform } from './seeded-uniform.js';

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
  /** Set when `onTokens` cancelled the row: its tokens are the ones generated until then (`finishReason` 'length'). */
  cancelled?: true;
}

/** The row `GenerateOptions.onTokens` reports on: completion `completion` of request `request`. */
export interface StreamedRow {
  request: number;
  completion: number;
  /** The scored prompt when the request echoes it (the same array on every call of the row). */
  promptTokens?: readonly ScoredToken[];
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
  /**
   * Prompt positions scored per head call when echoing (bounds memory: rows × vocab floats). Default
   * `echoHeadRows(vocab)`: 256, fewer for vocabularies above 65,536 so one call's logits stay within 64 MiB.
   */
  headChunk?: number;
  /**
   * Most prompt positions one prefill step feeds per row (the rest follow in further steps, appending to the KV cache,
   * so attention scratch is rows × heads × chunk × tokens, never tokens²). Default `prefillChunkTokens`: as many as keep
   * a row's attention scores within `PREFILL_SCORE_ELEMENTS`. Results do not depend on it.
   */
  prefillChunk?: number;
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
  /**
   * Prefill a prompt prefix of at least `MIN_SHARED_PREFIX` tokens that a batch's rows share once for the batch
   * (default true; needs a backend whose KV cache has `expandRows`). `false` computes every row's whole prompt; the
   * batches are formed the same way, so the results can be compared.
   */
  sharePrefixes?: boolean;
  /**
   * Hears every token as it is generated: after each decode step, for each row that produced a token (in row order;
   * never for a finished row), with the step's token (the eos or stop-completing token included). Returning
   * `'cancel'` ends the row there (`Completion.cancelled`); a batch whose rows all ended stops decoding. Absent, nothing
   * changes.
   */
  onTokens?: (row: StreamedRow, tokens: ScoredToken[]) => void | 'cancel';
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

/**
 * Attention scores (float32) one row of a prefill step may need: heads × new positions × all positions ≤ 2²² (16 MiB).
 * Backends that hold several rows' scores at once bound the rows themselves (onnxruntime's row chunks).
 */
export const PREFILL_SCORE_ELEMENTS = 2 ** 22;

/**
 * Prompt positions per row a prefill step feeds so that a row's attention scores (`heads × positions × total`, total
 * = every position the prompt reaches) stay within `PREFILL_SCORE_ELEMENTS`: the whole prompt when it fits, at least
 * one. The memory plan sizes prefill scratch with it.
 */
export function prefillChunkTokens(heads: number, total: number): number {
  return Math.max(1, Math.min(total, Math.floor(PREFILL_SCORE_ELEMENTS / (heads * total))));
}

/**
 * Positions handled between turns of the event loop when an echo's logits are copied and scored: one head call's
 * worth (up to 256 positions, 64 MiB of logits) is a few hundred milliseconds of work on the caller's thread, which in
 * a server held health checks and every other request; a slice of 32 is a few milliseconds.
 */
const ECHO_SLICE = 32;

/** A turn of the event loop (timers, I/O and other requests run), not just the microtask queue. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Logits (float32) one echo head call may return: 256 positions, fewer so that they stay within 2²⁴ values (64 MiB). */
export function echoHeadRows(vocab: number): number {
  return Math.max(1, Math.min(256, Math.floor(2 ** 24 / vocab)));
}

function scored(math: LogitsMath, id: number, logits: Float32Array, k: number): ScoredToken {
  const lse = math.logSumExp(logits);
  return { id, logprob: logits[id]! - lse, top: k > 0 ? math.topK(logits, k).map((t) => ({ id: t.id, logprob: t.value - lse })) : [] };
}

/**
 * Generates completions for many requests: rows are grouped by prompt length into batches of up to `maxBatchSize`,
 * left-padded, prefilled once, then decoded token by token with the KV cache until every row finished. A prompt
 * prefix of at least `MIN_SHARED_PREFIX` tokens that a batch's rows share is prefilled once for the batch when the
 * backend's cache can copy rows (`BackendKvCache.expandRows`); results are the same as without.
 */
export async function generate(engine: Decoder, requests: GenerationRequest[], options: GenerateOptions = {}): Promise<GenerationResult[]> {
  const c = engine.description;
  const results: GenerationResult[] = requests.map((request, i) => {
    const parsed = RequestSchema.safeParse(request);
    if (!parsed.success) {
      throw new Error(`request ${i} is invalid: ${parsed.error.issues.map((x) => `${x.path.join('.') || '(root)'}: ${x.message}`).join('; ')}`);
    }
    if ((request.stopSequences?.length ?? 0) > 0 && !options.decode) throw new Error(`request ${i} has stop sequences, which need options.decode (token ids → text)`);
    const total = request.prompt.length + (request.maxNewTokens ?? 16);
    if (total > c.maxPositions) {
      throw new Error(`request ${i}: prompt (${request.prompt.length} tokens) + max_new_tokens (${request.maxNewTokens ?? 16}) exceeds ${c.name}'s ${c.maxPositions} positions`);
    }
    if (options.padTo !== undefined && request.prompt.length > options.padTo) {
      throw new Error(`request ${i}: prompt (${request.prompt.length} tokens) is longer than padTo (${options.padTo})`);
    }
    for (const id of request.prompt) if (id >= c.vocabSize) throw new Error(`request ${i}: token id ${id} is outside the vocabulary 0..${c.vocabSize - 1}`);
    engine.checkRequestMemory({ promptTokens: request.prompt.length, newTokens: request.maxNewTokens ?? 16, echo: request.echoPrompt ?? false }, i);
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
  // Rows that want nothing (no new tokens, no echo) need no forward pass.
  const maxBatch = Math.max(1, options.maxBatchSize ?? 8);
  for (const group of batchGroups(rows.filter((r) => r.maxNew > 0 || r.echo), options.padTo === undefined)) {
    for (let i = 0; i < group.length; ) {
      const batch = fittingBatch(engine, group.slice(i, i + maxBatch), options.padTo ?? 0);
      await runBatch(engine, batch, options);
      i += batch.length;
    }
  }
  for (const row of rows) results[row.request]!.completions[row.completion] = row.out;
  return results;
}

/**
 * The longest start of `rows` (sorted by prompt length) whose batch fits the engine's memory budget: rows that each fit
 * alone (`checkRequestMemory`) but not together run in smaller batches. Results do not depend on the batching.
 */
function fittingBatch(engine: Decoder, rows: Row[], padTo: number): Row[] {
  let n = rows.length;
  while (n > 1) {
    const part = rows.slice(0, n);
    const need = { promptTokens: Math.max(padTo, ...part.map((r) => r.prompt.length)), newTokens: Math.max(...part.map((r) => r.maxNew)), echo: part.some((r) => r.echo) };
    if (engine.batchFits(n, need)) break;
    n--;
  }
  return rows.slice(0, n);
}

/**
 * Shortest shared prompt prefix worth computing once for a batch: below it the extra step (one row, then the copy of
 * its cache to every row) costs more than the rows save.
 */
export const MIN_SHARED_PREFIX = 32;

/**
 * The rows in batching order. Similar lengths together means less padding, so rows go by prompt length; but when
 * prefixes may be shared (no fixed `padTo` shape), rows whose first `MIN_SHARED_PREFIX` tokens agree form a group of
 * their own, batched apart from the others, in token order: rows that share the longest prefixes (a HELM trial: the
 * same instructions and in-context examples; trials may share only the instructions) end up in the same batches.
 * Rows alone with their start stay in one length-sorted group, as before.
 */
function batchGroups(rows: Row[], share: boolean): Row[][] {
  const byLength = (a: Row, b: Row) => a.prompt.length - b.prompt.length;
  if (!share) return [rows.sort(byLength)];
  const groups = new Map<string, Row[]>();
  const rest: Row[] = [];
  for (const r of rows) {
    if (r.prompt.length < MIN_SHARED_PREFIX) {
      rest.push(r);
      continue;
    }
    const key = r.prompt.slice(0, MIN_SHARED_PREFIX).join(',');
    const g = groups.get(key);
    if (g) g.push(r);
    else groups.set(key, [r]);
  }
  const shared: Row[][] = [];
  for (const g of groups.values()) {
    if (g.length > 1) shared.push(...prefixClusters(g.sort(byTokens)).map((cluster) => cluster.sort(byLength)));
    else rest.push(g[0]!);
  }
  return [rest.sort(byLength), ...shared];
}

/**
 * Splits rows in token order where the shared prefix would shrink by more than a tenth (one trial's in-context
 * examples ending, only the instructions shared with the next trial), so no batch straddles two long prefixes.
 */
function prefixClusters(sorted: Row[]): Row[][] {
  const clusters: Row[][] = [];
  let cluster: Row[] = [];
  let shared = 0;
  for (const r of sorted) {
    const first = cluster[0];
    const p = first ? commonLength(first.prompt, r.prompt, cluster.length > 1 ? shared : first.prompt.length) : 0;
    if (first && (cluster.length === 1 ? p >= MIN_SHARED_PREFIX : p >= 0.9 * shared)) {
      cluster.push(r);
      shared = p;
    } else {
      if (cluster.length) clusters.push(cluster);
      cluster = [r];
    }
  }
  if (cluster.length) clusters.push(cluster);
  return clusters;
}

/** Tokens `a` and `b` share from the start, looking at the first `limit` at most. */
function commonLength(a: number[], b: number[], limit: number): number {
  let i = 0;
  while (i < limit && i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** Lexicographic order of prompts (then shorter first): rows with long common prefixes become neighbours. */
function byTokens(a: Row, b: Row): number {
  const n = Math.min(a.prompt.length, b.prompt.length);
  for (let i = 0; i < n; i++) if (a.prompt[i] !== b.prompt[i]) return a.prompt[i]! - b.prompt[i]!;
  return a.prompt.length - b.prompt.length;
}

/** Longest token prefix all rows' prompts share. */
function sharedPrefixLength(rows: Row[]): number {
  const first = rows[0]!.prompt;
  let p = first.length;
  for (const r of rows) p = commonLength(first, r.prompt, p);
  return p;
}

/** Where the final hidden state of a row's prompt token lies: which step's output, its sequence length, row, slot. */
interface HiddenAt {
  hidden: Float32Array;
  seq: number;
  row: number;
  pos: number;
}

/** The prompt's forward pass done: each prompt token's hidden state, and the tokens fed (padding included). */
interface Prefilled {
  at(row: number, token: number): HiddenAt;
  fed: number;
}

/** Where slot `s` of a prompt block fed in chunks lies: the chunk's hidden states, its length and the slot in it. */
type ChunkedHidden = (row: number, slot: number) => HiddenAt;

/**
 * Feeds a block of prompt slots `[rows, S]` in steps of at most `prefillChunk` slots (each appending to the KV cache),
 * so attention scratch is bounded by chunk × tokens instead of S × tokens. Only the hidden states that are read later
 * are kept: every chunk's when `keepAll` (echo), else the last chunk's (the last slot of every row is in it).
 */
async function stepChunked(engine: Decoder, run: DecoderBatch, ids: number[][], mask: number[][], keepAll: boolean, options: GenerateOptions): Promise<ChunkedHidden> {
  const S = ids[0]!.length;
  const chunk = options.prefillChunk ?? prefillChunkTokens(engine.description.attention.heads, run.tokens + S);
  const chunks: { start: number; len: number; hidden: Float32Array }[] = [];
  for (let start = 0; start < S; start += chunk) {
    const end = Math.min(S, start + chunk);
    const hidden = await run.step(ids.map((r) => r.slice(start, end)), mask.map((r) => r.slice(start, end)));
    if (keepAll || end === S) chunks.push({ start, len: end - start, hidden });
  }
  return (row, slot) => {
    const c = chunks.find((x) => slot >= x.start && slot < x.start + x.len);
    if (!c) throw new Error(`internal: prompt slot ${slot} was not kept`);
    return { hidden: c.hidden, seq: c.len, row, pos: slot - c.start };
  };
}

/** Every row's whole prompt, left-padded to one length, in steps of `prefillChunk` slots. */
async function prefillPadded(engine: Decoder, run: DecoderBatch, rows: Row[], padTo: number, options: GenerateOptions): Promise<Prefilled> {
  const c = engine.description;
  const L = Math.max(padTo, ...rows.map((r) => r.prompt.length));
  const ids = rows.map((r) => [...Array<number>(L - r.prompt.length).fill(generationTokenIds(c).pad), ...r.prompt]);
  const mask = rows.map((r) => [...Array<number>(L - r.prompt.length).fill(0), ...Array<number>(r.prompt.length).fill(1)]);
  const at = await stepChunked(engine, run, ids, mask, rows.some((r) => r.echo), options);
  return { at: (row, token) => at(row, L - rows[row]!.prompt.length + token), fed: rows.length * L };
}

/**
 * The shared prefix once (one row), its cache copied to every row (`expandRows`), then each row's rest as
 * `[prefix, padding, suffix]`: positions count real tokens (`cumsum(mask)`), so they run on unbroken from the prefix
 * and every row sees exactly what its whole prompt left-padded would give. `run` has one row.
 */
async function prefillShared(engine: Decoder, run: DecoderBatch, rows: Row[], p: number, options: GenerateOptions): Promise<Prefilled> {
  const c = engine.description;
  const prefix = rows[0]!.prompt.slice(0, p);
  const S = Math.max(...rows.map((r) => r.prompt.length - p));
  const echo = rows.some((r) => r.echo);
  // A row whose prompt is the prefix itself reads the prefix's last state, which is in its last chunk (always kept).
  const prefixAt = await stepChunked(engine, run, [prefix], [prefix.map(() => 1)], echo, options);
  await run.expandRows(rows.length);
  let suffixAt: ChunkedHidden | undefined;
  if (S > 0) {
    const ids = rows.map((r) => [...Array<number>(S - (r.prompt.length - p)).fill(generationTokenIds(c).pad), ...r.prompt.slice(p)]);
    const mask = rows.map((r) => [...Array<number>(S - (r.prompt.length - p)).fill(0), ...Array<number>(r.prompt.length - p).fill(1)]);
    suffixAt = await stepChunked(engine, run, ids, mask, echo, options);
  }
  return {
    at: (row, token) => (token < p ? prefixAt(0, token) : suffixAt!(row, S - rows[row]!.prompt.length + token)),
    fed: p + rows.length * S,
  };
}

/** Logits `[picks.length, vocab]` at the given hidden states; a state several picks name (a shared prefix) goes through the head once. */
async function logitsAt(run: DecoderBatch, vocab: number, picks: HiddenAt[]): Promise<Float32Array> {
  const out = new Float32Array(picks.length * vocab);
  const sources = new Map<Float32Array, { seq: number; slots: Map<string, { row: number; pos: number; into: number[] }> }>();
  picks.forEach((p, i) => {
    let s = sources.get(p.hidden);
    if (!s) {
      s = { seq: p.seq, slots: new Map() };
      sources.set(p.hidden, s);
    }
    const key = `${p.row}/${p.pos}`;
    const slot = s.slots.get(key);
    if (slot) slot.into.push(i);
    else s.slots.set(key, { row: p.row, pos: p.pos, into: [i] });
  });
  for (const [hidden, s] of sources) {
    const slots = [...s.slots.values()];
    const logits = await run.logits(hidden, s.seq, slots);
    for (let k = 0; k < slots.length; k++) {
      if (k > 0 && k % ECHO_SLICE === 0) await nextTurn();
      for (const i of slots[k]!.into) out.set(logits.subarray(k * vocab, (k + 1) * vocab), i * vocab);
    }
  }
  return out;
}

/**
 * The prefix this batch computes once, or 0 for none: at least `MIN_SHARED_PREFIX` tokens shared by ≥ 2 rows, no
 * fixed `padTo` shape, and no sliding window that the padding between prefix and suffix could shift (the window
 * counts padded slots, as transformers' does; one longer than the whole batch never cuts).
 */
function sharedPrefixFor(engine: Decoder, rows: Row[], options: GenerateOptions): number {
  if (rows.length < 2 || options.padTo !== undefined || options.sharePrefixes === false) return 0;
  const p = sharedPrefixLength(rows);
  if (p < MIN_SHARED_PREFIX) return 0;
  const window = engine.description.attention.slidingWindow;
  if (window !== undefined) {
    // Slots the batch fills: its longest prompt and most new tokens (finished rows keep being fed padding).
    const slots = Math.max(...rows.map((r) => r.prompt.length)) + Math.max(...rows.map((r) => r.maxNew));
    if (window < slots) return 0;
  }
  return p;
}

async function runBatch(engine: Decoder, rows: Row[], options: GenerateOptions): Promise<void> {
  const c = engine.description;
  const B = rows.length;
  const started = performance.now();
  const p = sharedPrefixFor(engine, rows, options);
  let run = engine.startBatch(p > 0 ? 1 : B);
  try {
    let prefilled: Prefilled;
    if (p > 0 && run.canExpandRows) prefilled = await prefillShared(engine, run, rows, p, options);
    else {
      // A backend whose cache cannot copy rows computes every row's whole prompt.
      if (run.batch !== B) {
        await run.close();
        run = engine.startBatch(B);
      }
      prefilled = await prefillPadded(engine, run, rows, options.padTo ?? 0, options);
    }
    await generateRows(c, run, rows, prefilled, options, started);
  } finally {
    // Frees the batch's KV cache now (a backend may hold it in its worker) rather than at garbage collection.
    await run.close();
  }
  options.onBatch?.({ rows: rows.map((r) => [r.request, r.completion]), seconds: (performance.now() - started) / 1000 });
}

async function generateRows(c: ModelDescription, run: DecoderBatch, rows: Row[], prompt: Prefilled, options: GenerateOptions, prefillStart: number): Promise<void> {
  const { pad, eos } = generationTokenIds(c);
  let started = prefillStart;
  const B = rows.length;
  const timings = options.timings;
  // The backend's native row arithmetic where it has one: the same results as the JavaScript, faster.
  const math = run.logitsMath ?? jsLogitsMath;

  // Echo: score every prompt token from the logits at the previous position (chunked, so the logits stay small).
  const echoPicks: { row: number; token: number }[] = [];
  rows.forEach((r, b) => {
    if (!r.echo) return;
    r.out.promptTokens = [{ id: r.prompt[0]!, logprob: null, top: [] }];
    for (let j = 1; j < r.prompt.length; j++) echoPicks.push({ row: b, token: j });
  });
  const chunk = Math.max(1, options.headChunk ?? echoHeadRows(c.vocabSize));
  for (let i = 0; i < echoPicks.length; i += chunk) {
    const picks = echoPicks.slice(i, i + chunk);
    const logits = await logitsAt(run, c.vocabSize, picks.map((p) => prompt.at(p.row, p.token - 1)));
    for (let k = 0; k < picks.length; k++) {
      if (k > 0 && k % ECHO_SLICE === 0) await nextTurn();
      const p = picks[k]!;
      const row = rows[p.row]!;
      const l = logits.subarray(k * c.vocabSize, (k + 1) * c.vocabSize);
      row.out.promptTokens!.push(scored(math, row.prompt[p.token]!, l, row.topLogprobs));
    }
  }

  for (const r of rows) if (r.maxNew === 0) r.done = true;
  const finishPrefill = () => {
    if (!timings) return;
    timings.prefillMs += performance.now() - started;
    timings.prefillTokens += prompt.fed;
    started = performance.now();
  };
  if (rows.every((r) => r.done)) return finishPrefill();
  let logits = await logitsAt(run, c.vocabSize, rows.map((r, b) => prompt.at(b, r.prompt.length - 1)));
  finishPrefill();
  const maxSteps = Math.max(...rows.map((r) => r.maxNew));
  for (let s = 0; s < maxSteps; s++) {
    const next: number[][] = [];
    // Finished rows are fed masked padding: it keeps their positions (and the table) in range while others go on.
    const nextMask = rows.map((r) => [r.done ? 0 : 1]);
    rows.forEach((r, b) => {
      if (r.done) {
        next.push([pad]);
        return;
      }
      const l = logits.subarray(b * c.vocabSize, (b + 1) * c.vocabSize);
      const id = r.temperature < 1e-5 ? math.argmax(l) : sampleToken(l, r, r.rng);
      const dist = r.processed ? processedLogits(l, r) : l;
      const tok = scored(math, id, dist, r.topLogprobs);
      r.out.tokens.push(tok);
      r.out.sumLogprob += tok.logprob!;
      if ((r.stopAtEos && id === eos) || r.stopIds.has(id)) {
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
      if (options.onTokens?.({ request: r.request, completion: r.completion, promptTokens: r.out.promptTokens }, [tok]) === 'cancel' && !r.done) {
        r.done = true;
        r.out.cancelled = true;
      }
    });
    if (rows.every((r) => r.done)) break;
    const h = await run.step(next, nextMask);
    logits = await run.logits(h, 1, rows.map((_, b) => ({ row: b, pos: 0 })));
    if (timings) timings.decodeTokens += B;
  }
  if (timings) timings.decodeMs += performance.now() - started;
}
