import { randomBytes, randomInt } from 'node:crypto';
import type { Tokenizer } from '@flexhelm/core';
import type { Completion, OptEngine, ScoredToken } from '@flexhelm/engine';
import { ApiError } from './api-error.js';
import type { CompletionBatcher } from './completion-batcher.js';
import type { CompletionParams, PromptInput } from './completion-request.js';

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

export interface CompletionResponse {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
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
  private readonly tokenText = new Map<number, string>();

  constructor(
    readonly modelName: string,
    private readonly engine: OptEngine,
    private readonly tokenizer: Tokenizer,
    private readonly batcher: CompletionBatcher,
  ) {}

  private text(id: number): string {
    let t = this.tokenText.get(id);
    if (t === undefined) {
      t = this.tokenizer.decode([id]);
      this.tokenText.set(id, t);
    }
    return t;
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
    if (ids[0] === c.bosTokenId) return { ids, addedBos: false, text: prompt.text };
    return { ids: [c.bosTokenId, ...ids], addedBos: true, text: prompt.text };
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

  async complete(params: CompletionParams): Promise<CompletionResponse> {
    if (params.model !== undefined && params.model !== this.modelName) {
      throw new ApiError(404, `The model '${params.model}' does not exist on this server; it serves '${this.modelName}' (see GET /v1/models)`, 'invalid_request_error', 'model', 'model_not_found');
    }
    const prompts = params.prompts.map((p) => this.encode(p));
    prompts.forEach((p, i) => { this.checkWindow(p, params.maxTokens, i); });
    const seed = params.seed ?? randomInt(0, 2 ** 31);
    const generated = await Promise.all(
      prompts.map((p) =>
        this.batcher.submit({
          prompt: p.ids,
          maxNewTokens: params.maxTokens,
          temperature: params.temperature,
          topP: params.topP,
          n: params.n,
          seed,
          stopSequences: params.stop.length ? params.stop : undefined,
          echoPrompt: params.echo,
          topLogprobs: params.logprobs ?? 0,
        }),
      ),
    );
    const choices: CompletionChoice[] = [];
    let completionTokens = 0;
    generated.forEach((g, pi) => {
      g.completions.forEach((completion, ci) => {
        const choice = this.choice(prompts[pi]!, completion, params);
        completionTokens += completion.tokens.length;
        choices.push({ ...choice, index: pi * params.n + ci });
      });
    });
    const promptTokens = prompts.reduce((s, p) => s + p.ids.length, 0);
    return {
      id: `cmpl-${randomBytes(12).toString('hex')}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: this.modelName,
      choices,
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    };
  }

  private choice(prompt: EncodedPrompt, completion: Completion, params: CompletionParams): Omit<CompletionChoice, 'index'> {
    let generatedTokens = completion.tokens;
    let text = this.decode(generatedTokens.map((t) => t.id));
    let stopped = completion.finishReason !== 'length';
    // OpenAI returns the text before the first stop sequence, and the tokens that begin before it.
    const cut = Math.min(...params.stop.map((s) => text.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(cut)) {
      text = text.slice(0, cut);
      let offset = 0;
      let keep = 0;
      while (keep < generatedTokens.length && offset < cut) offset += this.text(generatedTokens[keep++]!.id).length;
      generatedTokens = generatedTokens.slice(0, keep);
      stopped = true;
    }
    const finish_reason = stopped ? 'stop' : 'length';
    if (params.logprobs === undefined) return { text: params.echo ? prompt.text + text : text, logprobs: null, finish_reason };

    const logprobs: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let offset = params.echo ? 0 : prompt.text.length;
    const add = (t: ScoredToken, textLength: number, first: boolean) => {
      logprobs.tokens.push(this.text(t.id));
      logprobs.token_logprobs.push(first ? null : t.logprob);
      logprobs.top_logprobs.push(first ? null : this.topMap(t));
      logprobs.text_offset.push(offset);
      offset += textLength;
    };
    if (params.echo) {
      (completion.promptTokens ?? []).forEach((t, i) => { add(t, prompt.addedBos && i === 0 ? 0 : this.text(t.id).length, i === 0); });
    }
    for (const t of generatedTokens) add(t, this.text(t.id).length, false);
    return { text: params.echo ? prompt.text + text : text, logprobs, finish_reason };
  }

  /** Top alternatives as OpenAI's `{token: logprob}`; when two ids share a text the likelier one stands. */
  private topMap(t: ScoredToken): Record<string, number> {
    const top = Object.create(null) as Record<string, number>; // a token may be spelled "__proto__"
    for (const alt of t.top) {
      const key = this.text(alt.id);
      if (!Object.hasOwn(top, key)) top[key] = alt.logprob;
    }
    return top;
  }
}
