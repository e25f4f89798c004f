import { randomBytes, randomInt } from 'node:crypto';
import type { Tokenizer } from '@flexhelm/core';
import type { Completion, OptEngine, ScoredToken } from '@flexhelm/engine';
import { promptInput } from '@flexhelm/runner';
import { ApiError } from './api-error.js';
import type { CompletionBatcher } from './completion-batcher.js';
import type { CompletionParams, PromptInput } from './completion-request.js';
import { ClientAbortError } from './client-abort-error.js';
import { codePoints, TokenText } from './token-text.js';

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

/** One server-sent event of a streamed completion: a finished choice, or (last, when asked) the usage alone. */
export interface CompletionChunk {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage?: Usage;
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

  constructor(
    readonly modelName: string,
    private readonly engine: OptEngine,
    private readonly tokenizer: Tokenizer,
    private readonly batcher: CompletionBatcher,
    options: CompletionServiceOptions = {},
  ) {
    this.tokenText = new TokenText(tokenizer);
    this.maxResponseEntries = options.maxResponseEntries ?? DEFAULT_MAX_RESPONSE_ENTRIES;
  }

  private decode(ids: number[]): string {
    return ids.length === 0 ? '' : this.tokenizer.decode(ids);
  }

  private encode(prompt: PromptInput): EncodedPrompt {
    const c = this.engine.config;
    if ('ids' in prompt) {
      const bad = prompt.ids.find((id) => id >= c.vocabSize);
      if (bad !== undefined) throw new ApiError(400, `token id ${bad} is outside the model's vocabulary 0..${c.vocabSize - 1}`, 'invalid_request_error', 'prompt');
      return { ids: prompt.ids, addedBos: false, text: this.decode(prompt.ids) };
    }
    const ids = prompt.text === '' ? [] : this.tokenizer.encode(prompt.text).map(Number);
    return { ...promptInput(ids, this.engine, this.tokenizer), text: prompt.text };
  }

  /** Rejects a prompt that does not fit the model's window with the completion asked for (400 with the numbers). */
  private checkWindow(prompt: EncodedPrompt, maxTokens: number, index: number): void {
    const limit = this.engine.config.maxPositionEmbeddings;
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
  private prepare(params: CompletionParams): Prepared {
    if (params.model !== undefined && params.model !== this.modelName) {
      throw new ApiError(404, `The model '${params.model}' does not exist on this server; it serves '${this.modelName}' (see GET /v1/models)`, 'invalid_request_error', 'model', 'model_not_found');
    }
    const prompts = params.prompts.map((p) => this.encode(p));
    prompts.forEach((p, i) => { this.checkWindow(p, params.maxTokens, i); });
    this.checkResponseSize(prompts, params);
    return { prompts, seed: params.seed ?? randomInt(0, 2 ** 31), id: `cmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(Date.now() / 1000) };
  }

  /** Schedules every row as one turn of the batcher's round-robin; `onChoice` hears each as it finishes. */
  private async generate(prep: Prepared, params: CompletionParams, signal: AbortSignal | undefined, onChoice?: (finished: FinishedChoice) => void): Promise<Completion[][]> {
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
      { signal, onCompletion: onChoice && ((pi, ci, c) => onChoice(this.finishedChoice(prep.prompts[pi]!, c, params, pi * params.n + ci))) },
    );
    return results.map((r) => r.completions);
  }

  private usage(prep: Prepared, completionTokens: number): Usage {
    const promptTokens = prep.prompts.reduce((s, p) => s + p.ids.length, 0);
    return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  }

  async complete(params: CompletionParams, options: CompleteOptions = {}): Promise<CompletionResponse> {
    const prep = this.prepare(params);
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
   * The completion as OpenAI's stream chunks: one per choice as its row finishes (the engine generates a row's tokens in
   * one batch, so a choice comes whole, with its `finish_reason`), then the usage when `stream_options.include_usage`.
   * Throws an ApiError at once (before any chunk) for a request that cannot run; leaving the loop early, or `signal`,
   * drops the rows that have not started.
   */
  stream(params: CompletionParams, options: CompleteOptions = {}): AsyncIterable<CompletionChunk> {
    const prep = this.prepare(params);
    return this.chunks(prep, params, options.signal);
  }

  private async *chunks(prep: Prepared, params: CompletionParams, signal: AbortSignal | undefined): AsyncGenerator<CompletionChunk> {
    const head = { id: prep.id, object: 'text_completion' as const, created: prep.created, model: this.modelName };
    let completionTokens = 0;
    for await (const finished of this.finished(prep, params, signal)) {
      completionTokens += finished.completion.tokens.length;
      yield { ...head, choices: [finished.choice] };
    }
    if (params.includeUsage) yield { ...head, choices: [], usage: this.usage(prep, completionTokens) };
  }

  /**
   * For other OpenAI endpoints on the same machinery (chat completions): checks `params` at once (throwing an ApiError
   * before anything runs), then yields each choice as its row finishes, in any order. Leaving the loop early, or
   * `signal`, drops the rows that have not started.
   */
  choices(params: CompletionParams, options: CompleteOptions = {}): { id: string; created: number; usage: (completionTokens: number) => Usage; finished: AsyncIterable<FinishedChoice> } {
    const prep = this.prepare(params);
    return { id: prep.id, created: prep.created, usage: (n) => this.usage(prep, n), finished: this.finished(prep, params, options.signal) };
  }

  /** Every choice as its row finishes: the batcher's callbacks turned into an async generator. */
  private async *finished(prep: Prepared, params: CompletionParams, signal: AbortSignal | undefined): AsyncGenerator<FinishedChoice> {
    const ready: FinishedChoice[] = [];
    let wake: (() => void) | undefined;
    let outcome: { failed: false } | { failed: true; err: unknown } | undefined;
    const stop = new AbortController();
    const forward = () => stop.abort(signal!.reason);
    if (signal?.aborted) forward();
    signal?.addEventListener('abort', forward, { once: true });
    void this.generate(prep, params, stop.signal, (finished) => {
      ready.push(finished);
      wake?.();
    }).then(
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

  private finishedChoice(prompt: EncodedPrompt, completion: Completion, params: CompletionParams, index: number): FinishedChoice {
    const { choice, tokens } = this.choice(prompt, completion, params);
    return { choice: { ...choice, index }, completion, tokens };
  }

  private choice(prompt: EncodedPrompt, completion: Completion, params: CompletionParams): { choice: Omit<CompletionChoice, 'index'>; tokens: ScoredToken[] } {
    let generatedTokens = completion.tokens;
    const last = generatedTokens.at(-1);
    // A chat model's end-of-turn token ends the answer but is not part of it.
    if (completion.finishReason === 'eos' && last && params.endTokenIds?.includes(last.id)) generatedTokens = generatedTokens.slice(0, -1);
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
    // Offsets count characters (code points) of the decoded text before each token; the added </s> takes no room.
    const { offsets } = this.tokenText.offsets(
      scored.map((t) => t.id),
      params.echo ? 0 : codePoints(prompt.text),
      (i) => params.echo && prompt.addedBos && i === 0,
    );
    const logprobs: CompletionLogprobs = {
      tokens: scored.map((t) => this.tokenText.label(t.id)),
      // The first echoed token has nothing before it to predict it.
      token_logprobs: scored.map((t, i) => (echoed > 0 && i === 0 ? null : t.logprob)),
      top_logprobs: scored.map((t, i) => (echoed > 0 && i === 0 ? null : this.topMap(t))),
      text_offset: offsets,
    };
    return { choice: { text: params.echo ? prompt.text + text : text, logprobs, finish_reason }, tokens: generatedTokens };
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
