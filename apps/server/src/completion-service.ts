import { randomBytes, randomInt } from 'node:crypto';
import type { Tokenizer } from '@flexhelm/core';
import { RequestMemoryError, type Completion, type Engine, type ScoredToken } from '@flexhelm/engine';
import { promptInput } from '@flexhelm/runner';
import { ApiError } from './api-error.js';
import type { CompletionBatcher } from './completion-batcher.js';
import type { CompletionParams, PromptInput } from './completion-request.js';
import { ClientAbortError } from './client-abort-error.js';
import { PendingText } from './pending-text.js';
import { codePoints, TokenText } from './token-text.js';
import type { TextWorkers } from './text-workers.js';

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

export interface CompletionChoice {
  text: string;
  index: number;
  logprobs: CompletionLogprobs | null;
  finish_reason: 'stop' | 'length';
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface CompletionResponse {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage: Usage;
}

/** One server-sent event of a streamed completion: new text of one choice, or (last, when asked) the usage alone. */
export interface CompletionChunk {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  /** `finish_reason` is null until a choice's last chunk. */
  choices: (Omit<CompletionChoice, 'finish_reason'> & { finish_reason: CompletionChoice['finish_reason'] | null })[];
  usage?: Usage;
}

/**
 * One piece of a streamed choice: text that can be sent now (never half a character, never text that could turn out to
 * be part of a stop sequence; the echoed prompt first), and the tokens whose text it completes. Concatenated, a
 * choice's pieces are its whole answer: text, logprob entries and tokens. The last piece carries `finished`.
 */
export interface StreamPiece {
  index: number;
  text: string;
  /** The logprob entries of the tokens this piece completes (prompt tokens in the echo piece); null without logprobs. */
  logprobs: CompletionLogprobs | null;
  /** The generated tokens this piece completes (without a chat end-of-turn token). */
  tokens: ScoredToken[];
  finished?: FinishedChoice;
}

/** What the engine reported for one row: tokens it just generated, or the whole finished choice. */
type RowEvent = { pi: number; ci: number } & ({ tokens: ScoredToken[]; promptTokens?: readonly ScoredToken[] } | { finished: FinishedChoice });

/** A streamed choice's progress: its text so far, its generated tokens, how many of them went out. */
interface ChoiceProgress {
  text: PendingText;
  generated: ScoredToken[];
  /** Characters of the generated text once each generated token is decoded (a split character counts at its end). */
  ends: number[];
  /** Decodes the generated tokens' bytes one token at a time, for `ends`. */
  bytes: InstanceType<typeof TextDecoder>;
  released: number;
  promptSent: boolean;
}

/** A finished choice: OpenAI's text choice, the engine's completion, and the generated tokens the choice keeps. */
export interface FinishedChoice {
  choice: CompletionChoice;
  completion: Completion;
  /** Generated tokens up to the stop sequence, without a chat end-of-turn token (what `choice.text` spells). */
  tokens: ScoredToken[];
}


export interface CompletionServiceOptions {
  /** Most `rows × tokens × top-k` one request may return. Default `DEFAULT_MAX_RESPONSE_ENTRIES`. */
  maxResponseEntries?: number;
  /** Worker threads that tokenize text prompts off the event loop (when they load the tokenizer). */
  textWorkers?: TextWorkers;
  /**
   * Most characters one token can stand for (`charsPerToken`): a text prompt whose characters cannot fit the window at
   * that rate is refused before it is tokenized.
   */
  charsPerToken?: number;
  /** The model's special token ids, left out of generated text when a request asks `skip_special_tokens` (the default). */
  specialTokenIds?: ReadonlySet<number>;
}

/**
 * 2^18 token entries (about 8 MB of JSON with top logprobs): one full 2048-token window echoed with 20 top logprobs,
 * or 64 prompts of 2048 tokens with logprobs 1, pass; 16 such prompts with 20 top logprobs each do not.
 */
export const DEFAULT_MAX_RESPONSE_ENTRIES = 262_144;

export interface CompleteOptions {
  /** Fired when the client goes away: rows not started are dropped and the call rejects with `ClientAbortError`. */
  signal?: AbortSignal;
}

interface Prepared {
  prompts: EncodedPrompt[];
  seed: number;
  id: string;
  created: number;
}

interface EncodedPrompt {
  ids: number[];
  /** The model input starts with a `</s>` that the text prompt did not spell out (Hugging Face's OPT tokenizer adds it). */
  addedBos: boolean;
  text: string;
}

/**
 * OpenAI's completions on the OPT engine: text prompts are tokenized as Hugging Face's OPT tokenizer does (with the
 * leading `</s>`), token-id prompts are fed as given. Echoed prompts carry each token's logprob given the tokens
 * before it (the first has none: `null`, as OpenAI reports); stop sequences cut the text before the stop.
 */
export class CompletionService {
  private readonly tokenText: TokenText;
  private readonly maxResponseEntries: number;
  private readonly textWorkers: TextWorkers | undefined;
  private readonly charsPerToken: number | undefined;
  private readonly specialTokenIds: ReadonlySet<number>;

  constructor(
    readonly modelName: string,
    private readonly engine: Engine,
    private readonly tokenizer: Tokenizer,
    private readonly batcher: CompletionBatcher,
    options: CompletionServiceOptions = {},
  ) {
    this.tokenText = new TokenText(tokenizer);
    this.maxResponseEntries = options.maxResponseEntries ?? DEFAULT_MAX_RESPONSE_ENTRIES;
    this.textWorkers = options.textWorkers?.encodes ? options.textWorkers : undefined;
    this.charsPerToken = options.charsPerToken;
    this.specialTokenIds = options.specialTokenIds ?? new Set();
  }

  private decode(ids: number[]): string {
    return ids.length === 0 ? '' : this.tokenizer.decode(ids);
  }

  /** The prompts' model inputs: text prompts tokenized in the worker threads (on this thread without them). */
  private async encode(prompts: PromptInput[]): Promise<EncodedPrompt[]> {
    const c = this.engine.description;
    const texts = prompts.flatMap((p) => ('text' in p && p.text !== '' ? [p.text] : []));
    const encoded = this.textWorkers && texts.length > 0 ? await this.textWorkers.encode(texts) : texts.map((t) => this.tokenizer.encode(t).map(Number));
    let next = 0;
    return prompts.map((prompt) => {
      if ('ids' in prompt) {
        const bad = prompt.ids.find((id) => id >= c.vocabSize);
        if (bad !== undefined) throw new ApiError(400, `token id ${bad} is outside the model's vocabulary 0..${c.vocabSize - 1}`, 'invalid_request_error', 'prompt');
        return { ids: prompt.ids, addedBos: false, text: this.decode(prompt.ids) };
      }
      const ids = prompt.text === '' ? [] : encoded[next++]!;
      return { ...promptInput(ids, this.engine, this.tokenizer), text: prompt.text };
    });
  }

  /**
   * Refuses, without tokenizing, a text prompt too long to fit whatever its tokens: at most `charsPerToken` characters
   * per token, so it has at least ⌈characters / charsPerToken⌉ tokens.
   */
  private checkCharacters(prompts: PromptInput[], maxTokens: number): void {
    const perToken = this.charsPerToken;
    if (perToken === undefined) return;
    const limit = this.engine.description.maxPositions;
    prompts.forEach((p, index) => {
      if (!('text' in p)) return;
      const least = Math.ceil(p.text.length / perToken);
      if (least + maxTokens > limit) {
        throw new ApiError(
          400,
          `This model's maximum context length is ${limit} tokens, however prompt ${index} has ${p.text.length} characters, at least ${least} tokens ` +
            `(a token of this model is at most ${perToken} characters), with ${maxTokens} for the completion. Please reduce the prompt or max_tokens.`,
          'invalid_request_error',
          'prompt',
          'context_length_exceeded',
        );
      }
    });
  }

  /** Rejects a prompt that does not fit the model's window with the completion asked for (400 with the numbers). */
  private checkWindow(prompt: EncodedPrompt, maxTokens: number, index: number): void {
    const limit = this.engine.description.maxPositions;
    if (prompt.ids.length + maxTokens > limit) {
      throw new ApiError(
        400,
        `This model's maximum context length is ${limit} tokens, however you requested ${prompt.ids.length + maxTokens} tokens ` +
          `(${prompt.ids.length} in prompt ${index}; ${maxTokens} for the completion). Please reduce the prompt or max_tokens.`,
        'invalid_request_error',
        'prompt',
        'context_length_exceeded',
      );
    }
  }

  /** Rejects a prompt whose row cannot fit the server's memory budget (--max-ram): 400 with the numbers and the fix. */
  private checkMemory(prompt: EncodedPrompt, params: CompletionParams, index: number): void {
    try {
      this.engine.checkRequestMemory({ promptTokens: prompt.ids.length, newTokens: params.maxTokens, echo: params.echo }, index);
    } catch (err) {
      if (err instanceof RequestMemoryError) throw new ApiError(400, err.message.replace(/^request/, 'prompt'), 'invalid_request_error', 'prompt', 'request_too_large');
      throw err;
    }
  }

  /** Bounds what one request can make the server compute and send: rows × tokens × top-k (400 with the numbers). */
  private checkResponseSize(prompts: EncodedPrompt[], params: CompletionParams): void {
    const topK = Math.max(1, params.logprobs ?? 1);
    const tokens = prompts.reduce((s, p) => s + params.n * ((params.echo ? p.ids.length : 0) + params.maxTokens), 0);
    const entries = tokens * topK;
    if (entries > this.maxResponseEntries) {
      const rows = prompts.length * params.n;
      throw new ApiError(
        400,
        `this request could return ${entries} token entries: ${rows} rows (prompts × n) with ${tokens} tokens in all ` +
          `(${params.echo ? 'echoed prompt tokens + ' : ''}max_tokens) × ${topK} top logprobs, above this server's limit of ` +
          `${this.maxResponseEntries} per request (--max-response-entries); send fewer prompts, a smaller n, max_tokens or logprobs`,
        'invalid_request_error',
        params.logprobs !== undefined && params.logprobs > 1 ? 'logprobs' : 'prompt',
      );
    }
  }

  /** Everything that can be refused is checked here, before a row is scheduled. */
  private async prepare(params: CompletionParams): Promise<Prepared> {
    if (params.model !== undefined && params.model !== this.modelName) {
      throw new ApiError(404, `The model '${params.model}' does not exist on this server; it serves '${this.modelName}' (see GET /v1/models)`, 'invalid_request_error', 'model', 'model_not_found');
    }
    this.checkCharacters(params.prompts, params.maxTokens);
    const prompts = await this.encode(params.prompts);
    prompts.forEach((p, i) => {
      this.checkWindow(p, params.maxTokens, i);
      this.checkMemory(p, params, i);
    });
    this.checkResponseSize(prompts, params);
    return { prompts, seed: params.seed ?? randomInt(0, 2 ** 31), id: `cmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(Date.now() / 1000) };
  }

  /**
   * Schedules every row as one turn of the batcher's round-robin; `onChoice` hears each as it finishes, `onTokens` each
   * token as it is generated.
   */
  private async generate(
    prep: Prepared,
    params: CompletionParams,
    signal: AbortSignal | undefined,
    onChoice?: (finished: FinishedChoice) => void,
    onTokens?: (pi: number, ci: number, tokens: ScoredToken[], promptTokens?: readonly ScoredToken[]) => void,
  ): Promise<Completion[][]> {
    const results = await this.batcher.submitAll(
      prep.prompts.map((p) => ({
        prompt: p.ids,
        maxNewTokens: params.maxTokens,
        temperature: params.temperature,
        topP: params.topP,
        n: params.n,
        seed: prep.seed,
        stopSequences: params.stop.length ? params.stop : undefined,
        stopTokenIds: params.endTokenIds ? [...params.endTokenIds] : undefined,
        echoPrompt: params.echo,
        topLogprobs: params.logprobs ?? 0,
      })),
      { signal, onTokens, onCompletion: onChoice && ((pi, ci, c) => onChoice(this.finishedChoice(prep.prompts[pi]!, c, params, pi * params.n + ci))) },
    );
    return results.map((r) => r.completions);
  }

  private usage(prep: Prepared, completionTokens: number): Usage {
    const promptTokens = prep.prompts.reduce((s, p) => s + p.ids.length, 0);
    return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  }

  async complete(params: CompletionParams, options: CompleteOptions = {}): Promise<CompletionResponse> {
    const prep = await this.prepare(params);
    const generated = await this.generate(prep, params, options.signal);
    const choices: CompletionChoice[] = [];
    let completionTokens = 0;
    generated.forEach((completions, pi) => {
      completions.forEach((completion, ci) => {
        choices.push(this.finishedChoice(prep.prompts[pi]!, completion, params, pi * params.n + ci).choice);
        completionTokens += completion.tokens.length;
      });
    });
    return { id: prep.id, object: 'text_completion', created: prep.created, model: this.modelName, choices, usage: this.usage(prep, completionTokens) };
  }

  /**
   * The completion as OpenAI's stream chunks, token by token as the engine generates them (see `StreamPiece`): each
   * choice's chunks have `finish_reason` null but the last; then the usage when `stream_options.include_usage`. The first
   * `next()` rejects with an ApiError (before any chunk) for a request that cannot run; leaving the loop early, or `signal`, drops the
   * rows that have not started and cancels the running ones at the engine's next step.
   */
  async *stream(params: CompletionParams, options: CompleteOptions = {}): AsyncGenerator<CompletionChunk> {
    const prep = await this.prepare(params);
    const signal = options.signal;
    const head = { id: prep.id, object: 'text_completion' as const, created: prep.created, model: this.modelName };
    let completionTokens = 0;
    for await (const p of this.pieces(prep, params, signal)) {
      if (p.finished) completionTokens += p.finished.completion.tokens.length;
      yield { ...head, choices: [{ text: p.text, index: p.index, logprobs: p.logprobs, finish_reason: p.finished?.choice.finish_reason ?? null }] };
    }
    if (params.includeUsage) yield { ...head, choices: [], usage: this.usage(prep, completionTokens) };
  }

  /**
   * For other OpenAI endpoints on the same machinery (chat completions): checks `params` at once (throwing an ApiError
   * before anything runs), then yields the pieces of every choice as `stream` does. Leaving the loop early, or `signal`,
   * cancels the rows.
   */
  async streamPieces(params: CompletionParams, options: CompleteOptions = {}): Promise<{ id: string; created: number; usage: (completionTokens: number) => Usage; pieces: AsyncIterable<StreamPiece> }> {
    const prep = await this.prepare(params);
    return { id: prep.id, created: prep.created, usage: (n) => this.usage(prep, n), pieces: this.pieces(prep, params, options.signal) };
  }

  /** Every row's tokens turned into the pieces of its choice as they come. */
  private async *pieces(prep: Prepared, params: CompletionParams, signal: AbortSignal | undefined): AsyncGenerator<StreamPiece> {
    const hidden = this.hiddenIds(params);
    const progress = new Map<number, ChoiceProgress>();
    for await (const e of this.events(prep, params, signal, true)) {
      const index = e.pi * params.n + e.ci;
      const prompt = prep.prompts[e.pi]!;
      let s = progress.get(index);
      if (!s) {
        s = { text: new PendingText((ids) => this.decode(ids), params.stop, hidden), generated: [], ends: [], bytes: new TextDecoder('utf-8'), released: 0, promptSent: false };
        progress.set(index, s);
      }
      if ('finished' in e) {
        progress.delete(index);
        yield this.lastPiece(prompt, s, e.finished);
        continue;
      }
      if (params.echo && !s.promptSent && e.promptTokens) {
        s.promptSent = true;
        const logprobs = params.logprobs === undefined ? null : this.logprobsOf(prompt, e.promptTokens, e.promptTokens.length, params, 0, e.promptTokens.length);
        yield { index, text: prompt.text, logprobs, tokens: [] };
      }
      for (const t of e.tokens) {
        if (hidden.has(t.id)) continue;
        s.generated.push(t);
        // As TokenText.offsets counts: bytes of an unfinished character count once it completes.
        s.ends.push((s.ends.at(-1) ?? 0) + codePoints(s.bytes.decode(this.tokenText.bytes(t.id), { stream: true })));
      }
      const text = s.text.push(e.tokens.map((t) => t.id));
      if (text === '') continue;
      // The tokens whose text has all been sent go with this piece.
      const sentChars = codePoints(s.text.sent);
      let to = s.released;
      while (to < s.generated.length && s.ends[to]! <= sentChars) to++;
      const echoed = params.echo ? (e.promptTokens?.length ?? 0) : 0;
      const logprobs =
        params.logprobs === undefined ? null : this.logprobsOf(prompt, [...(params.echo ? (e.promptTokens ?? []) : []), ...s.generated], echoed, params, echoed + s.released, echoed + to);
      yield { index, text, logprobs, tokens: s.generated.slice(s.released, to) };
      s.released = to;
    }
  }

  /** A choice's last piece: what the whole answer has beyond what was sent (the stop cut, held characters). */
  private lastPiece(prompt: EncodedPrompt, s: ChoiceProgress, f: FinishedChoice): StreamPiece {
    const echoed = s.promptSent ? (f.completion.promptTokens?.length ?? 0) : 0;
    // The echoed choice's text is the prompt's text, then the generated text.
    const sentChars = (s.promptSent ? prompt.text.length : 0) + s.text.sent.length;
    const lp = f.choice.logprobs;
    const from = echoed + s.released;
    const logprobs = lp && { tokens: lp.tokens.slice(from), token_logprobs: lp.token_logprobs.slice(from), top_logprobs: lp.top_logprobs.slice(from), text_offset: lp.text_offset.slice(from) };
    return { index: f.choice.index, text: f.choice.text.slice(sentChars), logprobs, tokens: f.tokens.slice(s.released), finished: f };
  }

  /**
   * For other OpenAI endpoints on the same machinery (chat completions): checks `params` at once (throwing an ApiError
   * before anything runs), then yields each choice as its row finishes, in any order. Leaving the loop early, or
   * `signal`, drops the rows that have not started.
   */
  async choices(params: CompletionParams, options: CompleteOptions = {}): Promise<{ id: string; created: number; usage: (completionTokens: number) => Usage; finished: AsyncIterable<FinishedChoice> }> {
    const prep = await this.prepare(params);
    return { id: prep.id, created: prep.created, usage: (n) => this.usage(prep, n), finished: this.finished(prep, params, options.signal) };
  }

  /** Every choice as its row finishes. */
  private async *finished(prep: Prepared, params: CompletionParams, signal: AbortSignal | undefined): AsyncGenerator<FinishedChoice> {
    for await (const e of this.events(prep, params, signal, false)) if ('finished' in e) yield e.finished;
  }

  /** The batcher's callbacks turned into an async generator: each row's tokens (when `tokens`) and each finished choice. */
  private async *events(prep: Prepared, params: CompletionParams, signal: AbortSignal | undefined, tokens: boolean): AsyncGenerator<RowEvent> {
    const ready: RowEvent[] = [];
    let wake: (() => void) | undefined;
    let outcome: { failed: false } | { failed: true; err: unknown } | undefined;
    const stop = new AbortController();
    const forward = () => stop.abort(signal!.reason);
    if (signal?.aborted) forward();
    signal?.addEventListener('abort', forward, { once: true });
    const push = (e: RowEvent) => {
      ready.push(e);
      wake?.();
    };
    const onTokens = tokens ? (pi: number, ci: number, t: ScoredToken[], promptTokens?: readonly ScoredToken[]) => push({ pi, ci, tokens: t, promptTokens }) : undefined;
    void this.generate(prep, params, stop.signal, (finished) => push({ pi: Math.floor(finished.choice.index / params.n), ci: finished.choice.index % params.n, finished }), onTokens).then(
      () => {
        outcome = { failed: false };
        wake?.();
      },
      (err: unknown) => {
        outcome = { failed: true, err };
        wake?.();
      },
    );
    try {
      for (;;) {
        const next = ready.shift();
        if (next) yield next;
        else if (outcome?.failed) throw outcome.err;
        else if (outcome) break;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal?.removeEventListener('abort', forward);
      if (!outcome) stop.abort(new ClientAbortError('the stream was closed before its end'));
    }
  }

  /** Generated token ids that are not part of the answer: chat end-of-turn tokens, special tokens when skipped. */
  private hiddenIds(params: CompletionParams): Set<number> {
    const hidden = new Set(params.endTokenIds ?? []);
    if (params.skipSpecialTokens) for (const id of this.specialTokenIds) hidden.add(id);
    return hidden;
  }

  private finishedChoice(prompt: EncodedPrompt, completion: Completion, params: CompletionParams, index: number): FinishedChoice {
    const { choice, tokens } = this.choice(prompt, completion, params);
    return { choice: { ...choice, index }, completion, tokens };
  }

  private choice(prompt: EncodedPrompt, completion: Completion, params: CompletionParams): { choice: Omit<CompletionChoice, 'index'>; tokens: ScoredToken[] } {
    // A chat model's end-of-turn token ends the answer but is not part of it; nor are special tokens when skipped.
    const hidden = this.hiddenIds(params);
    let generatedTokens = hidden.size === 0 ? completion.tokens : completion.tokens.filter((t) => !hidden.has(t.id));
    let text = this.decode(generatedTokens.map((t) => t.id));
    let stopped = completion.finishReason !== 'length';
    // OpenAI returns the text before the first stop sequence, and the tokens that begin before it.
    const cut = Math.min(...params.stop.map((s) => text.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(cut)) {
      text = text.slice(0, cut);
      const cutAt = codePoints(text);
      const starts = this.tokenText.offsets(generatedTokens.map((t) => t.id)).offsets;
      let keep = 0;
      while (keep < generatedTokens.length && starts[keep]! < cutAt) keep++;
      generatedTokens = generatedTokens.slice(0, keep);
      stopped = true;
    }
    const finish_reason = stopped ? 'stop' : 'length';
    if (params.logprobs === undefined) return { choice: { text: params.echo ? prompt.text + text : text, logprobs: null, finish_reason }, tokens: generatedTokens };

    const scored: ScoredToken[] = [...(params.echo ? (completion.promptTokens ?? []) : []), ...generatedTokens];
    const echoed = params.echo ? (completion.promptTokens?.length ?? 0) : 0;
    const logprobs = this.logprobsOf(prompt, scored, echoed, params, 0, scored.length);
    return { choice: { text: params.echo ? prompt.text + text : text, logprobs, finish_reason }, tokens: generatedTokens };
  }

  /**
   * OpenAI's logprob entries of `scored[from..to)`, where `scored` is the echoed prompt (`echoed` tokens, when echoing)
   * followed by generated tokens: the same entries whether built for a whole answer or a streamed piece of it.
   */
  private logprobsOf(prompt: EncodedPrompt, scored: readonly ScoredToken[], echoed: number, params: CompletionParams, from: number, to: number): CompletionLogprobs {
    // Offsets count characters (code points) of the decoded text before each token; the added </s> takes no room.
    const { offsets } = this.tokenText.offsets(
      scored.slice(0, to).map((t) => t.id),
      params.echo ? 0 : codePoints(prompt.text),
      (i) => params.echo && prompt.addedBos && i === 0,
    );
    const part = scored.slice(from, to);
    return {
      tokens: part.map((t) => this.tokenText.label(t.id)),
      // The first echoed token has nothing before it to predict it.
      token_logprobs: part.map((t, k) => (echoed > 0 && from + k === 0 ? null : t.logprob)),
      top_logprobs: part.map((t, k) => (echoed > 0 && from + k === 0 ? null : this.topMap(t))),
      text_offset: offsets.slice(from, to),
    };
  }

  /** Top alternatives as OpenAI's `{token: logprob}`; when two ids share a text the likelier one stands. */
  private topMap(t: ScoredToken): Record<string, number> {
    const top = Object.create(null) as Record<string, number>; // a token may be spelled "__proto__"
    for (const alt of t.top) {
      const key = this.tokenText.label(alt.id);
      if (!Object.hasOwn(top, key)) top[key] = alt.logprob;
    }
    return top;
  }
}
