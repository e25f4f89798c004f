import { PY_WHITESPACE_CLASS } from '@flexhelm/python-compat';
import type { EncodeOptions, Tokenizer, TokenValue } from '@flexhelm/core';

// Python's `re.findall(r'\s*\S+|\s+', text)` with Python's (Unicode) definition of whitespace.
const TOKEN_PATTERN = new RegExp(`[${PY_WHITESPACE_CLASS}]*[^${PY_WHITESPACE_CLASS}]+|[${PY_WHITESPACE_CLASS}]+`, 'gu');

/**
 * The `whitespace-stub` tokenizer the conformance golden data was generated with: every token is a run of whitespace
 * followed by non-whitespace (or trailing whitespace alone), tokens are their own strings, and decoding joins them, so
 * `decode(encode(t)) === t` for every text.
 */
export class WhitespaceStubTokenizer implements Tokenizer {
  readonly name: string;

  constructor(name = 'whitespace-stub') {
    this.name = name;
  }

  /** Truncation keeps `tokens[:maxLength]` with Python slice semantics (a negative length drops from the end). */
  encode(text: string, options: EncodeOptions = {}): string[] {
    const tokens = text.match(TOKEN_PATTERN) ?? [];
    return options.truncation && options.maxLength !== undefined ? tokens.slice(0, options.maxLength) : tokens;
  }

  decode(tokens: readonly TokenValue[]): string {
    return tokens.map((t) => String(t)).join('');
  }

  tokenize(text: string): string[] {
    return this.encode(text);
  }
}
