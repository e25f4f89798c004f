import { HelmError } from '@flexhelm/core';
import { gpt2VocabAndMerges } from './embedded-gpt2.js';
import type { TokenizerJson } from './hugging-face-tokenizer.js';

// The pieces every family tokenizer here is built from: GPT-2's embedded vocabulary re-cut into the family's form.

export interface FamilyTokenizerOptions {
  /** Ids the model's embedding has; the tokenizer never holds more (Qwen2's and Llama 3's may hold fewer, as published). */
  vocabSize: number;
  /** Write the family's instruct conventions: its `chat_template`, and the end-of-turn token as EOS. */
  chat?: boolean;
  /** `model_max_length` of tokenizer_config.json (the model's `max_position_embeddings`). */
  maxLength?: number;
}

/** Everything a family's tokenizer folder holds, as data; `eosTokenIds` is what generation_config.json lists. */
export interface FamilyTokenizerFiles {
  tokenizerJson: TokenizerJson;
  /** tokenizer_config.json (null where the published files write null). */
  config: Record<string, unknown>;
  specialTokensMap: Record<string, string>;
  /**
   * config.json's `bos_token_id`. Not always a token the tokenizer adds: Qwen2 names `<|endoftext|>` there (151643 in
   * the published config.json and generation_config.json) while its tokenizer_config.json has `bos_token: null`.
   */
  bosTokenId: number | undefined;
  eosTokenIds: number[];
  padTokenId: number | undefined;
}

/** The cl100k split pattern (Llama 3's and OLMo 2's), as the published tokenizer.json files hold it (Oniguruma syntax). */
export const CL100K_SPLIT = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

/** GPT-2's byte ↔ printable-character table (`bytes_to_unicode`), inverted: character → byte. */
function byteLevelInverse(): Map<string, number> {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const map = new Map<string, number>();
  for (const b of printable) map.set(String.fromCodePoint(b), b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (!printable.includes(b)) map.set(String.fromCodePoint(256 + n++), b);
  return map;
}

/**
 * A token no merge can build and no split pattern leaves whole (it mixes `<`, letters, `_`, digits), used to fill a
 * vocabulary up to its published size; it decodes to its own text.
 */
const filler = (n: number) => `<unused_${n}>`;

/** The first `count` tokens of GPT-2's byte-level vocabulary (filled up to `count`) and the merges among them. */
export function byteLevelVocab(count: number): { tokens: string[]; merges: [string, string][] } {
  const gpt2 = gpt2VocabAndMerges();
  const byId: string[] = [];
  for (const [token, id] of gpt2.vocab) if (token !== '<|endoftext|>') byId[id] = token;
  const tokens = byId.filter((t) => t !== undefined).slice(0, count);
  const known = new Set(tokens);
  for (let n = 0; tokens.length < count; n++) if (!known.has(filler(n))) tokens.push(filler(n));
  const merges: [string, string][] = [];
  for (const line of gpt2.merges) {
    const [left, right] = line.split(' ') as [string, string];
    if (known.has(left) && known.has(right) && known.has(left + right)) merges.push([left, right]);
  }
  return { tokens, merges };
}

/**
 * Sentencepiece-style pieces derived from GPT-2's tokens: each token that is whole UTF-8 text becomes a piece with
 * spaces written `▁`; merges are kept where both halves and the result are pieces.
 */
export function sentencepiecePieces(count: number, taken: Set<string>, options: { splitDigits?: boolean } = {}): { pieces: string[]; merges: [string, string][] } {
  const gpt2 = gpt2VocabAndMerges();
  const inverse = byteLevelInverse();
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const toPiece = (token: string): string | undefined => {
    const bytes: number[] = [];
    for (const ch of token) {
      const b = inverse.get(ch);
      if (b === undefined) return undefined;
      bytes.push(b);
    }
    try {
      return decoder.decode(new Uint8Array(bytes)).replaceAll(' ', '▁');
    } catch {
      return undefined; // part of a multi-byte character: byte fallback covers it
    }
  };
  const byId: [number, string][] = [...gpt2.vocab].filter(([t]) => t !== '<|endoftext|>').map(([t, id]) => [id, t]);
  byId.sort((a, b) => a[0] - b[0]);
  const pieces: string[] = [];
  const known = new Set<string>();
  for (const [, token] of byId) {
    if (pieces.length >= count) break;
    const piece = toPiece(token);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters stay byte tokens, as in Llama's vocabulary
    if (piece === undefined || piece === '' || /[\u0000-\u001f\u007f]/.test(piece) || taken.has(piece) || known.has(piece)) continue;
    // A sentencepiece model trained with split_digits (Gemma's) has no piece holding a digit beside anything else.
    if (options.splitDigits && piece.length > 1 && /\p{N}/u.test(piece)) continue;
    pieces.push(piece);
    known.add(piece);
  }
  for (let n = 0; pieces.length < count; n++) if (!known.has(filler(n)) && !taken.has(filler(n))) pieces.push(filler(n));
  const merges: [string, string][] = [];
  for (const line of gpt2.merges) {
    const [l, r] = line.split(' ') as [string, string];
    const left = toPiece(l);
    const right = toPiece(r);
    if (left !== undefined && right !== undefined && known.has(left) && known.has(right) && known.has(left + right)) merges.push([left, right]);
  }
  return { pieces, merges };
}

export const special = (id: number, content: string, rstrip = false) => ({ id, content, single_word: false, lstrip: false, rstrip, normalized: false, special: true });

/** The 256 byte-fallback tokens `<0x00>` … `<0xFF>`, in byte order. */
export function byteTokens(): string[] {
  return Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
}

export function bosTemplate(bos: string, bosId: number) {
  return {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [bos]: { id: bos, ids: [bosId], tokens: [bos] } },
  };
}

export const bpeModel = (vocab: Record<string, number>, merges: [string, string][], extra: Record<string, unknown>) => ({
  type: 'BPE',
  dropout: null,
  unk_token: null,
  continuing_subword_prefix: null,
  end_of_word_suffix: null,
  fuse_unk: false,
  byte_fallback: false,
  ignore_merges: false,
  ...extra,
  vocab,
  merges,
});

export function tooSmall(style: string, vocabSize: number, min: number): HelmError {
  return new HelmError('ValueError', `a ${style} tokenizer needs a vocabulary of at least ${min} ids (bytes and special tokens), but vocab_size is ${vocabSize}; raise vocab_size`);
}

/**
 * A tiktoken-converted byte-level BPE tokenizer.json (Llama 3's, OLMo 2's): GPT-2's first `regular` tokens as the
 * vocabulary, then `specials` as added tokens, split by the cl100k pattern before the byte-level mapping. The
 * post-processor and decoder default to plain ByteLevel ones (OLMo 2); Llama 3 passes its BOS template.
 */
export function cl100kTokenizerJson(regular: number, specials: readonly string[], o: { postProcessor?: unknown; decoder?: unknown; ignoreMerges?: boolean } = {}): TokenizerJson {
  const { tokens, merges } = byteLevelVocab(regular);
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((content, i) => special(regular + i, content)),
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: CL100K_SPLIT }, behavior: 'Isolated', invert: false }, byteLevel] },
    post_processor: o.postProcessor ?? { ...byteLevel, trim_offsets: false },
    decoder: o.decoder ?? byteLevel,
    model: bpeModel(Object.fromEntries(tokens.map((t, i) => [t, i])), merges, o.ignoreMerges ? { ignore_merges: true } : {}),
  };
}
