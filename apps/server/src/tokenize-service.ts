import { z } from 'zod';
import type { Tokenizer } from '@flexhelm/core';
import type { Engine } from '@flexhelm/engine';
import { promptInput } from '@flexhelm/runner';
import { ApiError } from './api-error.js';
import { parseChatRequest } from './chat-request.js';
import type { ChatService } from './chat-service.js';
import { parseRequestBody } from './completion-request.js';
import type { TextWorkers } from './text-workers.js';

const TokenizeSchema = z.object({
  model: z.string().optional(),
  prompt: z.string().optional(),
  messages: z.array(z.unknown()).optional(),
  add_special_tokens: z.boolean().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
});

const DetokenizeSchema = z.object({
  model: z.string().optional(),
  tokens: z.array(z.number().int().nonnegative(), 'tokens must be a list of non-negative integer token ids'),
});

/** vLLM's `POST /tokenize` answer. */
export interface TokenizeResponse {
  count: number;
  max_model_len: number;
  tokens: number[];
  token_strs: string[] | null;
}

/**
 * vLLM's `/tokenize` and `/detokenize` on the served model: a text `prompt` is tokenized as `/v1/completions` feeds it
 * to the model (`add_special_tokens`, default true, adds the BOS the completions add), `messages` as
 * `/v1/chat/completions` renders them (the template writes its own specials; `add_special_tokens` defaults to false,
 * as vLLM's). Tokenizing runs in the text workers, off the event loop.
 */
export class TokenizeService {
  constructor(
    private readonly modelName: string,
    private readonly engine: Engine,
    private readonly tokenizer: Tokenizer,
    private readonly workers: TextWorkers,
    private readonly chat: ChatService | undefined,
  ) {}

  private checkModel(model: string | undefined): void {
    if (model !== undefined && model !== this.modelName) {
      throw new ApiError(404, `The model '${model}' does not exist on this server; it serves '${this.modelName}' (see GET /v1/models)`, 'invalid_request_error', 'model', 'model_not_found');
    }
  }

  async tokenize(body: unknown): Promise<TokenizeResponse> {
    const b = parseRequestBody(TokenizeSchema, body);
    this.checkModel(b.model);
    if ((b.prompt === undefined) === (b.messages === undefined)) throw new ApiError(400, 'send either prompt (a string) or messages (a chat), not both or neither', 'invalid_request_error', 'prompt');
    let tokens: number[];
    if (b.prompt !== undefined) {
      const text = b.prompt;
      const ids = text === '' ? [] : this.workers.encodes ? (await this.workers.encode([text]))[0]! : this.tokenizer.encode(text).map(Number);
      tokens = b.add_special_tokens === false ? ids : promptInput(ids, this.engine, this.tokenizer).ids;
    } else {
      if (!this.chat) throw new ApiError(400, `the model '${this.modelName}' has no chat template, so it cannot tokenize messages; send prompt`, 'invalid_request_error', 'messages', 'model_not_chat');
      if (b.add_generation_prompt === false) throw new ApiError(400, 'add_generation_prompt=false is not supported: messages render as chat completions do, with the generation prompt', 'invalid_request_error', 'add_generation_prompt');
      const params = parseChatRequest({ messages: b.messages }, { maxTokens: 1, maxN: 1, maxPrompts: 1 });
      tokens = (await this.chat.prompt({ ...params, maxTokens: 1 })).ids;
      if (b.add_special_tokens === true) tokens = promptInput(tokens, this.engine, this.tokenizer).ids;
    }
    return {
      count: tokens.length,
      max_model_len: this.engine.description.maxPositions,
      tokens,
      token_strs: b.return_token_strs ? ((await this.decode(tokens, true)) as string[]) : null,
    };
  }

  async detokenize(body: unknown): Promise<{ prompt: string }> {
    const b = parseRequestBody(DetokenizeSchema, body);
    this.checkModel(b.model);
    const vocab = this.engine.description.vocabSize;
    const bad = b.tokens.find((id) => id >= vocab);
    if (bad !== undefined) throw new ApiError(400, `token id ${bad} is outside the model's vocabulary 0..${vocab - 1}`, 'invalid_request_error', 'tokens');
    return { prompt: b.tokens.length === 0 ? '' : ((await this.decode(b.tokens, false)) as string) };
  }

  /**
   * Decoding in the text workers when they hold the tokenizer: a 1 MiB body of token ids (a quarter of a million)
   * takes about half a second to decode, which on the event loop held every other request, /healthz too.
   */
  private async decode(ids: number[], pieces: boolean): Promise<string | string[]> {
    if (this.workers.encodes) return this.workers.decode(ids, pieces);
    if (!pieces) return this.tokenizer.decode(ids);
    const idToToken = (this.tokenizer as Partial<{ idToToken(id: number): string | undefined }>).idToToken?.bind(this.tokenizer);
    return ids.map((id) => idToToken?.(id) ?? this.tokenizer.decode([id]));
  }
}
