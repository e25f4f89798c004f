import { HelmError } from '@flexhelm/core';
import type { TokenizerConfig, TokenizerJson } from './hugging-face-tokenizer.js';

/** Parses `vocab.json` (token → id), rejecting anything that is not an object of non-negative integer ids. */
export function parseVocabJson(text: string, source = 'vocab.json'): Map<string, number> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new HelmError('ValueError', `${source} is not valid JSON (${(err as Error).message}); it must map each token string to its integer id`);
  }
  // Checked by hand: a zod record schema takes ~0.6 s on a 50k-token vocabulary, this loop a few milliseconds.
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new HelmError('ValueError', `${source} must be a JSON object mapping token strings to non-negative integer ids`);
  }
  const vocab = new Map<string, number>();
  for (const [token, id] of Object.entries(raw)) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) {
      throw new HelmError('ValueError', `${source} must map token strings to non-negative integer ids, but ${JSON.stringify(token)} maps to ${JSON.stringify(id)}`);
    }
    vocab.set(token, id);
  }
  return vocab;
}

/**
 * Parses `merges.txt` as the Rust tokenizers do: an optional `#version` first line, then one `left right` pair per
 * line; empty lines are skipped and any other line is an error naming its line number.
 */
export function parseMergesTxt(text: string, source = 'merges.txt'): string[] {
  const merges: string[] = [];
  const lines = text.split('\n');
  lines.forEach((rawLine, i) => {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if ((i === 0 && line.startsWith('#version')) || line === '') return;
    const parts = line.split(' ');
    if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
      throw new HelmError('ValueError', `${source} line ${i + 1} is ${JSON.stringify(line)}; every merge line must be two symbols separated by one space`);
    }
    merges.push(line);
  });
  return merges;
}

/** The special-token attributes of a tokenizer config, in the order Hugging Face registers them as added tokens. */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/** A special token as configs write it: a string or an AddedToken object `{content, ...}`. */
export function specialTokenContent(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/** The special tokens named by a config (bos, eos, unk, sep, pad, cls, mask, then additional ones), without repeats. */
export function configSpecialTokens(config: Record<string, unknown>): string[] {
  const out: string[] = [];
  const add = (v: unknown) => {
    const content = specialTokenContent(v);
    if (content !== undefined && !out.includes(content)) out.push(content);
  };
  for (const key of SPECIAL_TOKEN_KEYS) add(config[key]);
  const extra = config.additional_special_tokens;
  if (Array.isArray(extra)) extra.forEach(add);
  return out;
}

export interface ByteLevelBpeSpec {
  vocab: ReadonlyMap<string, number>;
  merges: readonly string[];
  /** Registered as special added tokens (kept whole when they appear in text); new ones get the next free ids. */
  specialTokens: readonly string[];
  addPrefixSpace?: boolean;
  /** When set, the post-processor prepends this token (OPT's `add_bos_token`); HELM never asks for it. */
  bosToken?: string;
}

/**
 * The `tokenizer.json` that Hugging Face's converter builds for a byte-level BPE tokenizer (GPT-2, OPT) from its
 * `vocab.json` and `merges.txt`: BPE model, ByteLevel pre-tokenizer and decoder, special tokens as added tokens.
 */
export function byteLevelBpeTokenizerJson(spec: ByteLevelBpeSpec): TokenizerJson {
  const vocab: Record<string, number> = Object.fromEntries(spec.vocab);
  let nextId = 0;
  for (const id of spec.vocab.values()) nextId = Math.max(nextId, id + 1);
  const addedTokens = spec.specialTokens.map((content) => {
    let id = spec.vocab.get(content);
    if (id === undefined) id = nextId++;
    return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  });
  const byteLevel = { type: 'ByteLevel', add_prefix_space: spec.addPrefixSpace ?? false, trim_offsets: true, use_regex: true };
  let postProcessor: unknown = { ...byteLevel, trim_offsets: false };
  if (spec.bosToken !== undefined) {
    const bosId = addedTokens.find((t) => t.content === spec.bosToken)?.id ?? spec.vocab.get(spec.bosToken);
    if (bosId === undefined) throw new HelmError('ValueError', `the BOS token ${JSON.stringify(spec.bosToken)} is neither in the vocabulary nor a special token`);
    postProcessor = {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: spec.bosToken, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: spec.bosToken, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { [spec.bosToken]: { id: spec.bosToken, ids: [bosId], tokens: [spec.bosToken] } },
    };
  }
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: postProcessor,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: [...spec.merges],
    },
  };
}

/** Builds the tokenizer.json for `vocab.json` + `merges.txt` + config, as transformers' GPT2 converter would. */
export function tokenizerJsonFromBpeFiles(vocabText: string, mergesText: string, config: TokenizerConfig = {}): TokenizerJson {
  const bos = specialTokenContent(config.bos_token);
  return byteLevelBpeTokenizerJson({
    vocab: parseVocabJson(vocabText),
    merges: parseMergesTxt(mergesText),
    specialTokens: configSpecialTokens(config),
    addPrefixSpace: config.add_prefix_space ?? false,
    bosToken: config.add_bos_token && bos !== undefined ? bos : undefined,
  });
}
