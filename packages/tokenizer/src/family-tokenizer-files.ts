import { HelmError } from '@flexhelm/core';
import { gpt2VocabAndMerges } from './embedded-gpt2.js';
import type { TokenizerJson } from './hugging-face-tokenizer.js';

/**
 * The tokenizer a family ships: Llama 3's byte-level BPE (tiktoken-converted, `<|begin_of_text|>` by template),
 * Qwen2's byte-level BPE (NFC, no BOS), or Llama 2 / Mistral's sentencepiece BPE with byte fallback.
 */
export type TokenizerStyle = 'llama3' | 'qwen2' | 'sentencepiece';

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

// Split patterns exactly as the published tokenizer.json files hold them (Oniguruma syntax; the JS library translates).
/** Llama 3's (tiktoken cl100k's) pre-tokenizer split pattern, as its tokenizer.json writes it. */
export const LLAMA3_SPLIT = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
/** Qwen2's split pattern: Llama 3's with single digits. */
export const QWEN2_SPLIT = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

// The published instruct templates (Llama 3 / 3.1 base form, Qwen2-Instruct's ChatML, Mistral-Instruct v0.1).
const LLAMA3_CHAT_TEMPLATE =
  "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
const QWEN2_CHAT_TEMPLATE =
  "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const MISTRAL_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

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
function byteLevelVocab(count: number): { tokens: string[]; merges: [string, string][] } {
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
function sentencepiecePieces(count: number, taken: Set<string>): { pieces: string[]; merges: [string, string][] } {
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

const special = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });

function bosTemplate(bos: string, bosId: number) {
  return {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [bos]: { id: bos, ids: [bosId], tokens: [bos] } },
  };
}

const bpeModel = (vocab: Record<string, number>, merges: [string, string][], extra: Record<string, unknown>) => ({
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

function tooSmall(style: TokenizerStyle, vocabSize: number, min: number): HelmError {
  return new HelmError('ValueError', `a ${style} tokenizer needs a vocabulary of at least ${min} ids (bytes and special tokens), but vocab_size is ${vocabSize}; raise vocab_size`);
}

/** Llama 3: 128000 byte-level tokens, then 256 special tokens (`<|begin_of_text|>` = first, `<|eot_id|>` = first + 9). */
function llama3Files(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  if (o.vocabSize < 512) throw tooSmall('llama3', o.vocabSize, 512);
  const regular = Math.min(128_000, o.vocabSize - 256);
  const { tokens, merges } = byteLevelVocab(regular);
  const names = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>', '<|reserved_special_token_1|>', '<|finetune_right_pad_id|>', '<|reserved_special_token_2|>', '<|start_header_id|>', '<|end_header_id|>', '<|eom_id|>', '<|eot_id|>', '<|python_tag|>'];
  for (let r = 3; names.length < 256; r++) names.push(`<|reserved_special_token_${r}|>`);
  const added = names.map((content, i) => special(regular + i, content));
  const id = (name: string) => regular + names.indexOf(name);
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false };
  const tokenizerJson: TokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: LLAMA3_SPLIT }, behavior: 'Isolated', invert: false }, byteLevel] },
    post_processor: { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }, bosTemplate('<|begin_of_text|>', id('<|begin_of_text|>'))] },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(Object.fromEntries(tokens.map((t, i) => [t, i])), merges, { ignore_merges: true }),
  };
  const eos = o.chat ? '<|eot_id|>' : '<|end_of_text|>';
  const config: Record<string, unknown> = {
    bos_token: '<|begin_of_text|>',
    clean_up_tokenization_spaces: true,
    eos_token: eos,
    model_input_names: ['input_ids', 'attention_mask'],
    model_max_length: o.maxLength ?? 131072,
    tokenizer_class: 'PreTrainedTokenizerFast',
    ...(o.chat ? { chat_template: LLAMA3_CHAT_TEMPLATE } : {}),
  };
  return {
    tokenizerJson,
    config,
    specialTokensMap: { bos_token: '<|begin_of_text|>', eos_token: eos },
    bosTokenId: id('<|begin_of_text|>'),
    // Llama 3.1/3.2 Instruct's generation_config.json: end_of_text, eom and eot.
    eosTokenIds: o.chat ? [id('<|end_of_text|>'), id('<|eom_id|>'), id('<|eot_id|>')] : [id('<|end_of_text|>')],
    padTokenId: undefined,
  };
}

/** Qwen2: 151643 byte-level tokens, then `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`; NFC; no BOS. */
function qwen2Files(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  if (o.vocabSize < 259) throw tooSmall('qwen2', o.vocabSize, 259);
  const regular = Math.min(151_643, o.vocabSize - 3);
  const { tokens, merges } = byteLevelVocab(regular);
  const names = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
  const tokenizerJson: TokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: names.map((content, i) => special(regular + i, content)),
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [{ type: 'Split', pattern: { Regex: QWEN2_SPLIT }, behavior: 'Isolated', invert: false }, { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }],
    },
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: bpeModel(Object.fromEntries(tokens.map((t, i) => [t, i])), merges, {}),
  };
  const eos = o.chat ? '<|im_end|>' : '<|endoftext|>';
  const config: Record<string, unknown> = {
    add_prefix_space: false,
    bos_token: null,
    clean_up_tokenization_spaces: false,
    eos_token: eos,
    errors: 'replace',
    model_max_length: o.maxLength ?? 32768,
    pad_token: '<|endoftext|>',
    split_special_tokens: false,
    tokenizer_class: 'Qwen2Tokenizer',
    unk_token: null,
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    ...(o.chat ? { chat_template: QWEN2_CHAT_TEMPLATE } : {}),
  };
  return {
    tokenizerJson,
    config,
    specialTokensMap: { eos_token: eos, pad_token: '<|endoftext|>' },
    // As Qwen/Qwen2-0.5B's config.json: <|endoftext|> is the model's BOS id, though the tokenizer never prepends it.
    bosTokenId: regular,
    // Qwen2-Instruct's generation_config.json lists im_end then endoftext; the base model only endoftext.
    eosTokenIds: o.chat ? [regular + 2, regular] : [regular],
    padTokenId: regular,
  };
}

/** Llama 2 / Mistral: `<unk>` `<s>` `</s>`, the 256 `<0xNN>` byte tokens, then pieces; exactly `vocabSize` ids. */
function sentencepieceFiles(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  const head = ['<unk>', '<s>', '</s>'];
  for (let b = 0; b < 256; b++) head.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  if (o.vocabSize < head.length + 1) throw tooSmall('sentencepiece', o.vocabSize, head.length + 1);
  const { pieces, merges } = sentencepiecePieces(o.vocabSize - head.length, new Set(head));
  const vocab = Object.fromEntries([...head, ...pieces].map((t, i) => [t, i]));
  const tokenizerJson: TokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: head.slice(0, 3).map((content, i) => special(i, content)),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    post_processor: bosTemplate('<s>', 1),
    decoder: {
      type: 'Sequence',
      decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }],
    },
    model: bpeModel(vocab, merges, { unk_token: '<unk>', fuse_unk: true, byte_fallback: true }),
  };
  const config: Record<string, unknown> = {
    add_bos_token: true,
    add_eos_token: false,
    bos_token: '<s>',
    clean_up_tokenization_spaces: false,
    eos_token: '</s>',
    legacy: true,
    model_max_length: o.maxLength ?? 4096,
    pad_token: null,
    sp_model_kwargs: {},
    tokenizer_class: 'LlamaTokenizer',
    unk_token: '<unk>',
    use_default_system_prompt: false,
    ...(o.chat ? { chat_template: MISTRAL_CHAT_TEMPLATE } : {}),
  };
  return { tokenizerJson, config, specialTokensMap: { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>' }, bosTokenId: 1, eosTokenIds: [2], padTokenId: undefined };
}

/** The tokenizer files of a family, built locally from GPT-2's embedded vocabulary (no network). */
export function familyTokenizerFiles(style: TokenizerStyle, options: FamilyTokenizerOptions): FamilyTokenizerFiles {
  if (!Number.isInteger(options.vocabSize) || options.vocabSize < 1) throw new HelmError('ValueError', `vocabSize must be a positive integer, got ${options.vocabSize}`);
  switch (style) {
    case 'llama3':
      return llama3Files(options);
    case 'qwen2':
      return qwen2Files(options);
    case 'sentencepiece':
      return sentencepieceFiles(options);
    default:
      throw new HelmError('ValueError', `unknown tokenizer style ${JSON.stringify(style)}; one of llama3, qwen2, sentencepiece`);
  }
}
