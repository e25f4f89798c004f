import { HelmError, type EncodeOptions, type Tokenizer, type TokenValue, type WindowService } from '@flexhelm/core';

/** What distinguishes one local window service from another in HELM 0.2.1. */
export interface LocalWindowServiceSpec {
  /** HELM's class name, e.g. `OPTWindowService`. */
  className: string;
  /** The tokenizer HELM names in its requests, e.g. `facebook/opt-66b`. */
  tokenizerName: string;
  maxSequenceLength: number;
  maxRequestLength: number;
  endOfTextToken: string;
  prefixToken: string;
}

/**
 * HELM 0.2.1's `LocalWindowService`: every count, fit and cut goes through the tokenizer (one tokenizer call per
 * encode/tokenize/decode, as HELM's tokenizer service makes them).
 */
export class LocalWindowService implements WindowService {
  readonly tokenizer: Tokenizer;
  readonly className: string;
  readonly tokenizerName: string;
  readonly maxSequenceLength: number;
  readonly maxRequestLength: number;
  readonly endOfTextToken: string;
  readonly prefixToken: string;

  constructor(tokenizer: Tokenizer, spec: LocalWindowServiceSpec) {
    this.tokenizer = tokenizer;
    this.className = spec.className;
    this.tokenizerName = spec.tokenizerName;
    this.maxSequenceLength = spec.maxSequenceLength;
    this.maxRequestLength = spec.maxRequestLength;
    this.endOfTextToken = spec.endOfTextToken;
    this.prefixToken = spec.prefixToken;
  }

  /** `maxLength` defaults to `maxRequestLength`; it only matters with `truncation`. */
  encode(text: string, options: EncodeOptions = {}): TokenValue[] {
    return this.tokenizer.encode(text, { truncation: options.truncation ?? false, maxLength: options.maxLength ?? this.maxRequestLength });
  }

  decode(tokens: readonly TokenValue[], _normalizedText?: string): string {
    return this.tokenizer.decode(tokens);
  }

  tokenize(text: string): string[] {
    return this.tokenizer.tokenize(text);
  }

  getNumTokens(text: string): number {
    return this.encode(text).length;
  }

  fitsWithinContextWindow(text: string, expectedCompletionTokenLength = 0): boolean {
    return this.getNumTokens(text) + expectedCompletionTokenLength <= this.maxRequestLength;
  }

  /**
   * Keeps the first `maxRequestLength - expectedCompletionTokenLength` tokens. When decoding those tokens gives a text
   * that encodes to more tokens (a cut inside a multi-byte character decodes to U+FFFD, which re-encodes longer), HELM
   * 0.2.1 fails an assertion; flexhelm drops one more token at a time until the text fits, which gives the same result
   * wherever HELM succeeds.
   */
  truncateFromRight(text: string, expectedCompletionTokenLength = 0): string {
    const maxLength = this.maxRequestLength - expectedCompletionTokenLength;
    if (maxLength < 0) {
      // HELM 0.2.1 fails its "Truncation failed" assertion here.
      throw new HelmError('AssertionError', `Truncation failed: the expected completion (${expectedCompletionTokenLength} tokens) alone exceeds the ${this.maxRequestLength}-token request limit of ${this.className} (max_length = ${maxLength}); lower max_tokens`);
    }
    let kept = this.encode(text, { truncation: true, maxLength });
    let result = this.decode(kept);
    let numTokens = this.getNumTokens(result);
    while (numTokens > maxLength && kept.length > 0) {
      kept = kept.slice(0, kept.length - Math.max(1, numTokens - maxLength));
      result = this.decode(kept);
      numTokens = this.getNumTokens(result);
    }
    if (numTokens > maxLength) {
      throw new HelmError('AssertionError', `Truncation failed (${numTokens} > ${maxLength}). Input text: ${text}`);
    }
    return result;
  }
}
