/**
 * What HELM's adapters and metrics need from a tokenizer, as HELM 0.2.1's TokenizationRequest/DecodeRequest define it.
 * Tokens are ids for real tokenizers and strings for some (HELM's `TokenizationToken.value: str | int`).
 * Implementations live in @flexhelm/tokenizer; this package only states the contract.
 */
export type TokenValue = number | string;

export interface EncodeOptions {
  /** Keep only the first `maxLength` tokens. */
  truncation?: boolean;
  maxLength?: number;
}

export interface Tokenizer {
  /** HELM's tokenizer name, e.g. `facebook/opt-66b`. */
  readonly name: string;
  /** Tokens of `text` without special tokens (HELM's tokenizer service adds no BOS). */
  encode(text: string, options?: EncodeOptions): TokenValue[];
  /** Text of `tokens`; special tokens kept, no clean-up of tokenization spaces. */
  decode(tokens: readonly TokenValue[]): string;
  /** The token strings (`Ġthe`, `Ċ` for byte-level BPE). */
  tokenize(text: string): string[];
}

/** HELM 0.2.1's WindowService: how a model's context window is measured and prompts are cut to fit it. */
export interface WindowService {
  readonly tokenizer: Tokenizer;
  readonly maxSequenceLength: number;
  readonly maxRequestLength: number;
  readonly endOfTextToken: string;
  readonly prefixToken: string;
  encode(text: string, options?: EncodeOptions): TokenValue[];
  decode(tokens: readonly TokenValue[], normalizedText?: string): string;
  tokenize(text: string): string[];
  getNumTokens(text: string): number;
  fitsWithinContextWindow(text: string, expectedCompletionTokenLength?: number): boolean;
  truncateFromRight(text: string, expectedCompletionTokenLength?: number): string;
}
