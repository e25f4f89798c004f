import type { EncodeOptions, Tokenizer, TokenValue } from '@flexhelm/core';

/**
 * Wraps a tokenizer and counts calls as HELM's tokenizer service sees them: `tokenize` requests (encode and tokenize
 * both are tokenization requests in HELM) and `decode` requests.
 */
export class CountingTokenizer implements Tokenizer {
  readonly calls = { tokenize: 0, decode: 0 };
  constructor(readonly inner: Tokenizer) {}
  get name(): string {
    return this.inner.name;
  }
  encode(text: string, options?: EncodeOptions): TokenValue[] {
    this.calls.tokenize++;
    return this.inner.encode(text, options);
  }
  decode(tokens: readonly TokenValue[]): string {
    this.calls.decode++;
    return this.inner.decode(tokens);
  }
  tokenize(text: string): string[] {
    this.calls.tokenize++;
    return this.inner.tokenize(text);
  }
}
