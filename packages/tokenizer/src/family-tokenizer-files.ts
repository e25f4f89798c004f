import { HelmError } from '@flexhelm/core';
import { gemmaFiles } from './gemma-tokenizer-files.js';
import type { TokenizerJson } from './hugging-face-tokenizer.js';
import { olmo2Files } from './olmo2-tokenizer-files.js';
import { phi3Files } from './phi3-tokenizer-files.js';
import { sentencepieceFiles } from './sentencepiece-tokenizer-files.js';
import { bosTemplate, bpeModel, byteLevelVocab, CL100K_SPLIT, cl100kTokenizerJson, type FamilyTokenizerFiles, type FamilyTokenizerOptions, special, tooSmall } from './tokenizer-file-parts.js';

/**
 * A tokenizer by its own name (a family entry's bases name the one the family ships; no family name keys this table):
 * `llama3` Llama 3's byte-level BPE (tiktoken-converted, `<|begin_of_text|>` by template), `qwen` Qwen's byte-level BPE
 * (NFC, no BOS; Qwen2, Qwen2.5, Qwen2-MoE), `sentencepiece` Llama 2 / Mistral's sentencepiece BPE with byte fallback,
 * `gemma` Gemma's sentencepiece BPE (no prefix space, split digits), `phi3-mini` Phi-3-mini/3.5-mini's (Llama 2's plus
 * chat tokens), or `dolma2` OLMo 2's cl100k-style byte-level BPE (allenai/dolma2-tokenizer).
 */
export type TokenizerStyle = 'llama3' | 'qwen' | 'sentencepiece' | 'gemma' | 'phi3-mini' | 'dolma2';
const STYLES: Record<TokenizerStyle, (o: FamilyTokenizerOptions) => FamilyTokenizerFiles> = {
  llama3: llama3Files,
  qwen: qwen2Files,
  sentencepiece: sentencepieceFiles,
  gemma: gemmaFiles,
  'phi3-mini': phi3Files,
  dolma2: olmo2Files,
};

export type { FamilyTokenizerFiles, FamilyTokenizerOptions } from './tokenizer-file-parts.js';

// Split patterns exactly as the published tokenizer.json files hold them (Oniguruma syntax; the JS library translates).
/** Llama 3's (tiktoken cl100k's, OLMo 2's too) pre-tokenizer split pattern, as its tokenizer.json writes it. */
export const LLAMA3_SPLIT = CL100K_SPLIT;
/** Qwen2's split pattern: Llama 3's with single digits. */
export const QWEN2_SPLIT = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

// The published instruct templates (Llama 3 / 3.1 base form, Qwen2-Instruct's ChatML).
const LLAMA3_CHAT_TEMPLATE =
  "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
const QWEN2_CHAT_TEMPLATE =
  "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/** Llama 3: 128000 byte-level tokens, then 256 special tokens (`<|begin_of_text|>` = first, `<|eot_id|>` = first + 9). */
function llama3Files(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  if (o.vocabSize < 512) throw tooSmall('llama3', o.vocabSize, 512);
  const regular = Math.min(128_000, o.vocabSize - 256);
  const names = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>', '<|reserved_special_token_1|>', '<|finetune_right_pad_id|>', '<|reserved_special_token_2|>', '<|start_header_id|>', '<|end_header_id|>', '<|eom_id|>', '<|eot_id|>', '<|python_tag|>'];
  for (let r = 3; names.length < 256; r++) names.push(`<|reserved_special_token_${r}|>`);
  const id = (name: string) => regular + names.indexOf(name);
  const tokenizerJson = cl100kTokenizerJson(regular, names, {
    postProcessor: { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }, bosTemplate('<|begin_of_text|>', id('<|begin_of_text|>'))] },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    ignoreMerges: true,
  });
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
  if (o.vocabSize < 259) throw tooSmall('qwen', o.vocabSize, 259);
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

/** The tokenizer files of a family, built locally from GPT-2's embedded vocabulary (no network). */
export function familyTokenizerFiles(style: TokenizerStyle, options: FamilyTokenizerOptions): FamilyTokenizerFiles {
  if (!Number.isInteger(options.vocabSize) || options.vocabSize < 1) throw new HelmError('ValueError', `vocabSize must be a positive integer, got ${options.vocabSize}`);
  if (!Object.hasOwn(STYLES, style)) throw new HelmError('ValueError', `unknown tokenizer style ${JSON.stringify(style)}; one of ${Object.keys(STYLES).join(', ')}`);
  return STYLES[style](options);
}
