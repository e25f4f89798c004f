import { HelmError, type EncodeOptions, type Tokenizer, type TokenValue, type WindowService } from '@flexhelm/core';
import type { LocalWindowService } from './local-window-service.js';

/** One token of AI21's `/tokenize` answer: its value (`▁Hello`, `<0xE8>`) and where it sits in the normalized text. */
export interface Ai21Token {
  value: string;
  textRange: { start: number; end: number };
}

/**
 * AI21's tokenizer. It exists only behind AI21's web API (HELM calls it through its proxy server with an API key), so
 * flexhelm cannot run it offline: whoever has access supplies this interface (e.g. from recorded answers).
 */
export interface Ai21TokenizerApi {
  /** AI21's tokenization of `text`: the normalized text (AI21 rewrites e.g. "½" to "1/2") and its tokens. */
  tokenize(text: string): { text: string; tokens: Ai21Token[] };
}

const MAX_TOKENIZATION_REQUEST_LENGTH = 11000;
const MAX_CHARACTER_LENGTH = 100_000;
const BYTE_TOKEN = /^<0x[0-9A-F]{2}>/;

/** The token-carrying form AI21 needs: values are strings, decoding uses text ranges into the normalized text. */
class Ai21Tokenizer implements Tokenizer {
  readonly name = 'ai21/j1';
  constructor(private readonly api: Ai21TokenizerApi) {}
  encode(text: string, _options?: EncodeOptions): TokenValue[] {
    return this.api.tokenize(text).tokens.map((t) => t.value);
  }
  decode(): string {
    throw new HelmError('NotImplementedError', 'AI21 tokens decode only with their text ranges: use Ai21WindowService.decodeTokens(tokens, normalizedText)');
  }
  tokenize(text: string): string[] {
    return this.api.tokenize(text).tokens.map((t) => t.value);
  }
}

/**
 * HELM 0.2.1's `AI21WindowService` (`ai21/j1-*`): 2047-token requests, token counts from AI21's tokenizer, truncation by
 * text ranges. Long texts are split into chunks by GPT-2 token counts before tokenizing, as HELM does.
 */
export class Ai21WindowService implements WindowService {
  readonly className = 'AI21WindowService';
  readonly tokenizer: Tokenizer;
  readonly maxSequenceLength = 2047;
  readonly maxRequestLength = 2047;
  readonly endOfTextToken = ' ';
  readonly prefixToken = '';

  constructor(
    private readonly api: Ai21TokenizerApi,
    private readonly gpt2: LocalWindowService,
  ) {
    this.tokenizer = new Ai21Tokenizer(api);
  }

  /** The token values (strings); use {@link encodeWithRanges} for the text ranges and normalized text. */
  encode(text: string, _options?: EncodeOptions): TokenValue[] {
    return this.encodeWithRanges(text).tokens.map((t) => t.value);
  }

  encodeWithRanges(text: string): { text: string; tokens: Ai21Token[] } {
    const result = this.longTokenization(text);
    const last = result.tokens.at(-1);
    if (last && last.textRange.end !== result.text.length) {
      throw new HelmError('AssertionError', `AI21 tokenization does not cover the normalized text (last token ends at ${last.textRange.end}, text has ${result.text.length} chars)`);
    }
    return result;
  }

  decode(tokens: readonly TokenValue[], _normalizedText?: string): string {
    if (tokens.length === 0) return '';
    throw new HelmError('NotImplementedError', 'AI21 tokens decode only with their text ranges: use decodeTokens(tokens, normalizedText)');
  }

  /** HELM's AI21 decode: byte tokens (`<0xE8>`) are joined and UTF-8 decoded, others are read from their text range. */
  decodeTokens(tokens: readonly Ai21Token[], normalizedText: string): string {
    if (tokens.length === 0) return '';
    if (!normalizedText) throw new HelmError('AssertionError', 'The AI21 tokenizer needs `normalized_text` for decoding');
    for (let j = 0; j + 1 < tokens.length; j++) {
      if (tokens[j]!.textRange.end !== tokens[j + 1]!.textRange.start) {
        throw new HelmError('AssertionError', 'The tokens to be decoded must form a substring of `normalized_text`.');
      }
    }
    let out = '';
    for (let i = 0; i < tokens.length; ) {
      if (BYTE_TOKEN.test(tokens[i]!.value)) {
        const bytes: number[] = [];
        // HELM 0.2.1's loop never re-reads the token value: every remaining token counts as a copy of the first byte.
        const first = tokens[i]!.value;
        while (i < tokens.length && BYTE_TOKEN.test(first)) {
          bytes.push(parseInt(first.slice(3, 5), 16));
          i++;
        }
        out += new TextDecoder('utf-8').decode(Uint8Array.from(bytes));
      } else {
        out += normalizedText.slice(tokens[i]!.textRange.start, tokens[i]!.textRange.end);
        i++;
      }
    }
    return out;
  }

  tokenize(text: string): string[] {
    return this.api.tokenize(text).tokens.map((t) => t.value);
  }

  getNumTokens(text: string): number {
    return this.tokenize(text).length;
  }

  fitsWithinContextWindow(text: string, expectedCompletionTokenLength = 0): boolean {
    return text.length <= MAX_CHARACTER_LENGTH && this.getNumTokens(text) + expectedCompletionTokenLength <= this.maxRequestLength;
  }

  truncateFromRight(text: string, expectedCompletionTokenLength = 0): string {
    text = text.slice(0, MAX_CHARACTER_LENGTH);
    const tokens = this.api.tokenize(text).tokens.slice(0, Math.max(0, this.maxRequestLength - expectedCompletionTokenLength));
    if (tokens.length === 0) return text;
    const start = tokens[0]!.textRange.start;
    let end = tokens[tokens.length - 1]!.textRange.end;
    let truncated = text.slice(start, end);
    // HELM's workaround for AI21 counts that exceed the limit by one: cut characters until it fits.
    while (!this.fitsWithinContextWindow(truncated, expectedCompletionTokenLength)) {
      end -= 1;
      truncated = text.slice(start, end);
    }
    return truncated;
  }

  private longTokenization(text: string): { text: string; tokens: Ai21Token[] } {
    const gpt2Tokens = this.gpt2.encode(text);
    if (gpt2Tokens.length < MAX_TOKENIZATION_REQUEST_LENGTH) return this.api.tokenize(text);
    const tokens: Ai21Token[] = [];
    const chunks: string[] = [];
    let processedTokens = 0;
    let processedPositions = 0;
    while (processedTokens < gpt2Tokens.length) {
      let size = Math.min(gpt2Tokens.length - processedTokens, MAX_TOKENIZATION_REQUEST_LENGTH);
      let chunkText = this.gpt2.decode(gpt2Tokens.slice(processedTokens, processedTokens + size));
      // Never split inside a character: that would make AI21 produce byte tokens.
      while (chunkText.endsWith('\ufffd')) {
        size -= 1;
        chunkText = this.gpt2.decode(gpt2Tokens.slice(processedTokens, processedTokens + size));
      }
      const chunk = this.api.tokenize(chunkText);
      let chunkTokens = chunk.tokens;
      if (processedTokens !== 0 && chunkTokens[0] && chunkTokens[0].textRange.start === chunkTokens[0].textRange.end) chunkTokens = chunkTokens.slice(1);
      for (const t of chunkTokens) {
        tokens.push({ value: t.value, textRange: { start: t.textRange.start + processedPositions, end: t.textRange.end + processedPositions } });
      }
      chunks.push(chunk.text);
      processedTokens += size;
      processedPositions += chunk.text.length;
    }
    return { text: chunks.join(''), tokens };
  }
}
