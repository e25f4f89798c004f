import type { EncodeOptions, TokenValue, Tokenizer, WindowService } from '@flexhelm/core';

/**
 * A small, fully working WindowService for tests: tokens are whitespace-separated pieces with their leading space
 * (so `" Paris"` is one token), ids are their index in a growing vocabulary. Real runs use @flexhelm/tokenizer.
 */
export class WhitespaceWindowService implements WindowService {
  readonly maxSequenceLength = 2048;
  readonly maxRequestLength = 2049;
  readonly endOfTextToken = '</s>';
  readonly prefixToken = '</s>';
  private readonly vocab: string[] = [];
  readonly tokenizer: Tokenizer;

  constructor() {
    this.tokenizer = {
      name: 'test/whitespace',
      encode: (text, options) => this.encode(text, options),
      decode: (tokens) => this.decode(tokens),
      tokenize: (text) => this.tokenize(text),
    };
  }

  tokenize(text: string): string[] {
    return text.match(/\s*\S+|\s+$/g) ?? [];
  }

  encode(text: string, options: EncodeOptions = {}): TokenValue[] {
    const ids = this.tokenize(text).map((piece) => {
      let id = this.vocab.indexOf(piece);
      if (id < 0) id = this.vocab.push(piece) - 1;
      return id;
    });
    return options.truncation && options.maxLength !== undefined ? ids.slice(0, options.maxLength) : ids;
  }

  decode(tokens: readonly TokenValue[]): string {
    return tokens.map((t) => (typeof t === 'number' ? this.vocab[t] : t)).join('');
  }

  getNumTokens(text: string): number {
    return this.tokenize(text).length;
  }

  fitsWithinContextWindow(text: string, expectedCompletionTokenLength = 0): boolean {
    return this.getNumTokens(text) + expectedCompletionTokenLength <= this.maxRequestLength;
  }

  truncateFromRight(text: string, expectedCompletionTokenLength = 0): string {
    return this.decode(this.encode(text, { truncation: true, maxLength: this.maxRequestLength - expectedCompletionTokenLength }));
  }
}
