import type { Tokenizer } from '@flexhelm/core';
import type { ScoredToken } from '@flexhelm/engine';
import { ApiError } from './api-error.js';
import type { ChatParams } from './chat-request.js';
import type { TextWorkers } from './text-workers.js';
import type { CompletionParams } from './completion-request.js';
import type { CompletionService, FinishedChoice, Usage } from './completion-service.js';
import { TokenText } from './token-text.js';

interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

/** OpenAI's chat logprobs: one entry per generated token, with its top alternatives. */
export interface ChatLogprobs {
  content: (TokenLogprob & { top_logprobs: TokenLogprob[] })[];
}

export interface ChatChoice {
  index: number;
  message: { role: 'assistant'; content: string; refusal: null };
  logprobs: ChatLogprobs | null;
  finish_reason: 'stop' | 'length';
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: ChatChoice[];
  usage: Usage;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: number; delta: { role?: 'assistant'; content?: string }; logprobs: ChatLogprobs | null; finish_reason: 'stop' | 'length' | null }[];
  usage?: Usage;
}

export interface ChatServiceOptions {
  /** Token ids that end an assistant turn (eos ids of generation_config.json, the template's end-of-turn token). */
  endTokenIds: readonly number[];
  /** Largest `max_tokens` (the server's limit), also the default when the client sends none. */
  maxTokens: number;
  /** The model's window (positions). */
  maxPositions: number;
  /** Most characters one token stands for: a rendered prompt longer than the window at this rate is not tokenized. */
  charsPerToken?: number;
}

/**
 * OpenAI's chat completions for a model with a chat template: the messages are rendered with the template (as
 * transformers' `apply_chat_template(add_generation_prompt=True)` does), tokenized without adding special tokens (the
 * template writes its own BOS), and completed on the same batcher as `/v1/completions` with the model's end-of-turn
 * tokens ending the answer and left out of it.
 */
export class ChatService {
  private readonly tokenText: TokenText;

  constructor(
    readonly modelName: string,
    private readonly completions: CompletionService,
    private readonly workers: TextWorkers,
    private readonly tokenizer: Tokenizer,
    private readonly options: ChatServiceOptions,
  ) {
    this.tokenText = new TokenText(tokenizer);
  }

  /** The prompt the template makes of `params.messages`, as text and token ids. */
  async prompt(params: ChatParams): Promise<{ text: string; ids: number[] }> {
    if (params.model !== undefined && params.model !== this.modelName) {
      throw new ApiError(404, `The model '${params.model}' does not exist on this server; it serves '${this.modelName}' (see GET /v1/models)`, 'invalid_request_error', 'model', 'model_not_found');
    }
    const perToken = this.options.charsPerToken;
    const room = this.options.maxPositions - (params.maxTokens ?? 1);
    const rendered = await this.workers.renderAndEncode(params.messages, perToken === undefined ? undefined : room * perToken);
    if ('tooLong' in rendered) {
      throw new ApiError(
        400,
        `This model's maximum context length is ${this.options.maxPositions} tokens, however the messages render as a prompt of ${rendered.tooLong} characters, ` +
          `at least ${Math.ceil(rendered.tooLong / perToken!)} tokens (a token of this model is at most ${perToken} characters). Please send fewer or shorter messages.`,
        'invalid_request_error',
        'messages',
        'context_length_exceeded',
      );
    }
    const { text } = rendered;
    // Without a tokenizer in the workers, this thread tokenizes.
    const ids = this.workers.encodes ? rendered.ids : text === '' ? [] : this.tokenizer.encode(text).map(Number);
    if (ids.length === 0) throw new ApiError(400, 'the chat template rendered these messages as an empty prompt', 'invalid_request_error', 'messages');
    return { text, ids };
  }

  /** The completions request the chat request makes: its rendered prompt, the model's end-of-turn tokens. */
  private async completionParams(params: ChatParams): Promise<CompletionParams> {
    const { ids } = await this.prompt(params);
    const room = this.options.maxPositions - ids.length;
    const maxTokens = params.maxTokens ?? Math.min(this.options.maxTokens, room);
    if (maxTokens < 1 && params.maxTokens === undefined) {
      throw new ApiError(400, `the messages take ${ids.length} tokens, the whole of this model's ${this.options.maxPositions}-token window; send fewer or shorter messages`, 'invalid_request_error', 'messages', 'context_length_exceeded');
    }
    return {
      model: undefined,
      prompts: [{ ids }],
      maxTokens,
      temperature: params.temperature,
      topP: params.topP,
      n: params.n,
      stop: params.stop,
      logprobs: params.topLogprobs,
      echo: false,
      seed: params.seed,
      stream: params.stream,
      includeUsage: params.includeUsage,
      endTokenIds: this.options.endTokenIds,
      skipSpecialTokens: params.skipSpecialTokens,
    };
  }

  async complete(params: ChatParams, options: { signal?: AbortSignal } = {}): Promise<ChatCompletion> {
    const run = await this.completions.choices(await this.completionParams(params), { signal: options.signal });
    const choices: ChatChoice[] = [];
    let completionTokens = 0;
    for await (const f of run.finished) {
      completionTokens += f.completion.tokens.length;
      choices.push(this.choice(f, params));
    }
    choices.sort((a, b) => a.index - b.index);
    return { id: chatId(run.id), object: 'chat.completion', created: run.created, model: this.modelName, choices, usage: run.usage(completionTokens) };
  }

  /**
   * Chunks as OpenAI streams them: each choice's `delta: {role: 'assistant', content: ''}` first, then its text token by
   * token as the engine generates it (`delta: {content}`; end-of-turn tokens never shown, text that may be part of a
   * stop sequence held back), then `delta: {}` with its finish reason; a last chunk with the usage when
   * `stream_options.include_usage`. Errors before the first chunk (a bad model name, a template error, a prompt over
   * the window) are thrown before anything is streamed.
   */
  async stream(params: ChatParams, options: { signal?: AbortSignal } = {}): Promise<AsyncIterable<ChatChunk>> {
    const run = await this.completions.streamPieces(await this.completionParams(params), { signal: options.signal });
    const head = { id: chatId(run.id), object: 'chat.completion.chunk' as const, created: run.created, model: this.modelName };
    const self = this;
    return (async function* () {
      for (let index = 0; index < params.n; index++) yield { ...head, choices: [{ index, delta: { role: 'assistant' as const, content: '' }, logprobs: null, finish_reason: null }] };
      let completionTokens = 0;
      for await (const p of run.pieces) {
        if (p.text !== '' || p.tokens.length > 0) {
          const logprobs = params.topLogprobs === undefined ? null : { content: p.tokens.map((t) => self.tokenLogprob(t)) };
          yield { ...head, choices: [{ index: p.index, delta: { content: p.text }, logprobs, finish_reason: null }] };
        }
        if (p.finished) {
          completionTokens += p.finished.completion.tokens.length;
          yield { ...head, choices: [{ index: p.index, delta: {}, logprobs: null, finish_reason: p.finished.choice.finish_reason }] };
        }
      }
      if (params.includeUsage) yield { ...head, choices: [], usage: run.usage(completionTokens) };
    })();
  }

  private choice(f: FinishedChoice, params: ChatParams): ChatChoice {
    const logprobs = params.topLogprobs === undefined ? null : { content: f.tokens.map((t) => this.tokenLogprob(t)) };
    return { index: f.choice.index, message: { role: 'assistant', content: f.choice.text, refusal: null }, logprobs, finish_reason: f.choice.finish_reason };
  }

  private entry(id: number, logprob: number): TokenLogprob {
    return { token: this.tokenText.label(id), logprob, bytes: [...this.tokenText.bytes(id)] };
  }

  private tokenLogprob(t: ScoredToken): TokenLogprob & { top_logprobs: TokenLogprob[] } {
    return { ...this.entry(t.id, t.logprob ?? 0), top_logprobs: t.top.map((alt) => this.entry(alt.id, alt.logprob)) };
  }
}

/** `chatcmpl-…` ids, as OpenAI names chat completions. */
function chatId(completionId: string): string {
  return completionId.replace(/^cmpl-/, 'chatcmpl-');
}
