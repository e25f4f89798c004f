import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { HelmError, type EncodeOptions, type Tokenizer, type TokenValue } from '@flexhelm/core';

/** A `tokenizer.json` document (Hugging Face tokenizers' serialisation), as far as flexhelm reads it. */
export interface TokenizerJson {
  model: { type?: string; vocab: unknown; merges?: unknown[]; [key: string]: unknown };
  added_tokens?: { id: number; content: string; special?: boolean; [key: string]: unknown }[];
  [key: string]: unknown;
}

/** `tokenizer_config.json`: only the fields flexhelm uses are typed. */
export interface TokenizerConfig {
  tokenizer_class?: string;
  bos_token?: string;
  eos_token?: string;
  unk_token?: string;
  pad_token?: string;
  add_bos_token?: boolean;
  add_prefix_space?: boolean;
  [key: string]: unknown;
}

// Oniguruma's `\s` (what the Rust tokenizers behind Python's fast tokenizers use for the GPT-2 split pattern) is
// U+0009–U+000D, U+0085, U+2028, U+2029 and the Space_Separator category; JavaScript's `\s` lacks U+0085 and adds U+FEFF.
const ONIG_SPACE = '\\t-\\r\\x85\\u2028\\u2029\\p{Zs}';
const GPT2_SPLIT = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${ONIG_SPACE}\\p{L}\\p{N}]+|[${ONIG_SPACE}]+(?![^${ONIG_SPACE}])|[${ONIG_SPACE}]+`,
  'gu',
);
const JS_GPT2_SPLIT_SOURCE = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;

interface PatternHolder {
  pattern?: RegExp;
  tokenizers?: PatternHolder[];
}

/** Makes the library's byte-level pre-tokenizers split whitespace as the Rust tokenizers do. */
function useOnigurumaWhitespace(preTokenizer: PatternHolder | null): void {
  if (!preTokenizer) return;
  if (preTokenizer.pattern instanceof RegExp && preTokenizer.pattern.source === JS_GPT2_SPLIT_SOURCE) preTokenizer.pattern = GPT2_SPLIT;
  for (const inner of preTokenizer.tokenizers ?? []) useOnigurumaWhitespace(inner);
}

/** The special token a `TemplateProcessing` post-processor (alone or in a `Sequence`) puts before a single sequence. */
function templateBosToken(postProcessor: unknown): string | undefined {
  const p = postProcessor as { type?: unknown; processors?: unknown; single?: unknown } | null | undefined;
  if (!p || typeof p !== 'object') return undefined;
  if (p.type === 'Sequence' && Array.isArray(p.processors)) {
    for (const inner of p.processors) {
      const found = templateBosToken(inner);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (p.type !== 'TemplateProcessing' || !Array.isArray(p.single)) return undefined;
  const first = p.single[0] as { SpecialToken?: { id?: unknown } } | undefined;
  return typeof first?.SpecialToken?.id === 'string' ? first.SpecialToken.id : undefined;
}

/**
 * A Hugging Face tokenizer (byte-level BPE for GPT-2 and OPT) behaving as HELM 0.2.1's tokenizer service uses it:
 * `encode` adds no special tokens, `decode` keeps special tokens and does not clean up tokenization spaces.
 */
export class HuggingFaceTokenizer implements Tokenizer {
  readonly name: string;
  /** The id a model input starts with when the tokenizer config asks for a BOS (`add_bos_token`), else undefined. */
  readonly bosTokenId: number | undefined;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  readonly vocabSize: number;
  private readonly hf: HfTokenizer;

  constructor(name: string, tokenizerJson: TokenizerJson, config: TokenizerConfig = {}) {
    this.name = name;
    try {
      this.hf = new HfTokenizer(tokenizerJson, { ...config, clean_up_tokenization_spaces: false });
    } catch (err) {
      throw new HelmError('ValueError', `tokenizer ${name}: tokenizer.json could not be loaded (${(err as Error).message}); check that it is a Hugging Face tokenizers file`, { cause: err });
    }
    useOnigurumaWhitespace(this.hf.pre_tokenizer as unknown as PatternHolder | null);
    const idOf = (token: string | undefined) => (token === undefined ? undefined : this.hf.token_to_id(token));
    // `add_bos_token` decides where the config says; otherwise the post-processor's template does (Llama 3 writes no
    // add_bos_token: its tokenizer.json prepends <|begin_of_text|> by a TemplateProcessing step).
    this.bosTokenId = config.add_bos_token === undefined ? idOf(templateBosToken(tokenizerJson.post_processor)) : config.add_bos_token ? idOf(config.bos_token) : undefined;
    this.eosTokenId = idOf(config.eos_token);
    this.padTokenId = idOf(config.pad_token);
    this.vocabSize = this.hf.get_vocab(true).size;
  }

  /** Token ids without special tokens; `truncation` keeps the first `maxLength` ids (HF's right truncation). */
  encode(text: string, options: EncodeOptions = {}): number[] {
    const ids = this.hf.encode(text, { add_special_tokens: false }).ids;
    if (!options.truncation || options.maxLength === undefined) return ids;
    if (!Number.isInteger(options.maxLength) || options.maxLength < 0) {
      throw new HelmError('ValueError', `tokenizer ${this.name}: maxLength must be a non-negative integer, got ${options.maxLength}`);
    }
    return ids.slice(0, options.maxLength);
  }

  /**
   * Text of token ids. Ids past the tokenizer's vocabulary decode to nothing, as in Hugging Face's tokenizers: OPT's
   * output layer has more rows (50272) than its tokenizer has tokens (50265), and a model may pick one of the extra ids.
   */
  decode(tokens: readonly TokenValue[]): string {
    if (tokens.length === 0) return '';
    for (const t of tokens) {
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 0) {
        throw new HelmError('ValueError', `tokenizer ${this.name}: cannot decode token ${JSON.stringify(t)}: ids must be non-negative integers`);
      }
    }
    const known = (tokens as number[]).filter((t) => this.hf.id_to_token(t) !== undefined);
    return known.length === 0 ? '' : this.hf.decode(known, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** The token strings (`Ġthe`, `Ċ`), as HF's `tokenize`. */
  tokenize(text: string): string[] {
    return this.hf.tokenize(text, { add_special_tokens: false });
  }

  tokenToId(token: string): number | undefined {
    return this.hf.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.hf.id_to_token(id);
  }
}
