import { ModelFileError } from '@flexhelm/engine';
import { LLAMA3_SPLIT, QWEN2_SPLIT, type TokenizerJson } from '@flexhelm/tokenizer';
import { GgufMetadata, isNumber, isString } from './gguf-metadata.js';
import type { GgufFile } from './read-gguf.js';

/** llama.cpp's token types (`tokenizer.ggml.token_type`). */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

/** `tokenizer.ggml.pre` values and the split pattern each stands for (llama.cpp's pre-tokenizer types). */
const PRE_SPLITS: Record<string, string | null> = {
  'llama-bpe': LLAMA3_SPLIT,
  llama3: LLAMA3_SPLIT,
  dbrx: LLAMA3_SPLIT,
  'smaug-bpe': LLAMA3_SPLIT,
  qwen2: QWEN2_SPLIT,
  // GPT-2's own pattern: the ByteLevel pre-tokenizer's built-in regex.
  'gpt-2': null,
  default: null,
  olmo: null,
};

/** The `tokenizer.ggml.pre` name the export writes for a split pattern (null: GPT-2's): the table's first for it. */
export function ggmlPreName(split: string | null): string {
  return Object.entries(PRE_SPLITS).find(([, s]) => s === split)![0];
}

/**
 * llama.cpp's `tokenizer.ggml.model` for SentencePiece BPE with byte fallback: a tokenizer kind that shares Llama's
 * name, not the family (any family's SentencePiece tokenizer is stored as it).
 */
export const GGML_SENTENCEPIECE = 'llama'; // family-names: ok, llama.cpp's tokenizer kind

export interface GgufTokenizerFiles {
  tokenizerJson: TokenizerJson;
  /** tokenizer_config.json. */
  config: Record<string, unknown>;
}

/**
 * The tokenizer stored in a GGUF file's `tokenizer.ggml.*` metadata as Hugging Face files: `gpt2` (byte-level BPE with
 * its merges and `tokenizer.ggml.pre` split pattern) or `llama` (SentencePiece BPE with byte fallback, merges rebuilt
 * from the piece scores as transformers' converter does). Control and user-defined tokens become added tokens;
 * BOS/EOS/UNK/PAD, `add_bos_token` and `tokenizer.chat_template` go to tokenizer_config.json.
 */
export function ggufTokenizer(file: GgufFile): GgufTokenizerFiles {
  const m = new GgufMetadata(file);
  const kind = m.string('tokenizer.ggml.model');
  if (kind === undefined) throw new ModelFileError(`${file.path}: metadata tokenizer.ggml.model is missing; the file holds no tokenizer`);
  const tokens = m.array('tokenizer.ggml.tokens', isString, 'string');
  if (!tokens?.length) throw new ModelFileError(`${file.path}: metadata tokenizer.ggml.tokens is missing or empty`);
  const types = m.array('tokenizer.ggml.token_type', isNumber, 'number') ?? tokens.map(() => TOKEN_TYPE.normal);
  if (types.length !== tokens.length) throw m.fail('tokenizer.ggml.token_type', `has ${types.length} items for ${tokens.length} tokens`);
  const vocab: Record<string, number> = {};
  const seen = new Map<string, number>();
  tokens.forEach((t, id) => {
    // llama.cpp tolerates repeated pieces (it indexes by id); a tokenizer.json vocabulary cannot hold them.
    if (seen.has(t)) throw m.fail('tokenizer.ggml.tokens', `holds ${JSON.stringify(t)} twice (ids ${seen.get(t)} and ${id})`);
    seen.set(t, id);
    vocab[t] = id;
  });
  const idKey = (key: string) => {
    const id = m.number(`tokenizer.ggml.${key}`, undefined);
    if (id === undefined) return undefined;
    if (!Number.isInteger(id) || id < 0 || id >= tokens.length) throw m.fail(`tokenizer.ggml.${key}`, `is ${id}; it must be a token id below ${tokens.length}`);
    return tokens[id];
  };
  const bos = idKey('bos_token_id');
  const eos = idKey('eos_token_id');
  const pad = idKey('padding_token_id');
  let unk = idKey('unknown_token_id');
  const addBos = m.bool('tokenizer.ggml.add_bos_token') ?? kind === GGML_SENTENCEPIECE;
  const added = tokens.flatMap((content, id) => {
    const t = types[id];
    const special = t === TOKEN_TYPE.control || t === TOKEN_TYPE.unknown;
    if (!special && t !== TOKEN_TYPE.userDefined) return [];
    return [{ id, content, single_word: false, lstrip: false, rstrip: false, normalized: !special && kind === GGML_SENTENCEPIECE, special }];
  });
  const postProcessor =
    addBos && bos !== undefined
      ? {
          type: 'TemplateProcessing',
          single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
          pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
          special_tokens: { [bos]: { id: bos, ids: [vocab[bos]], tokens: [bos] } },
        }
      : null;
  let tokenizerJson: TokenizerJson;
  if (kind === 'gpt2') {
    const merges = m.array('tokenizer.ggml.merges', isString, 'string');
    if (!merges) throw new ModelFileError(`${file.path}: a gpt2 tokenizer needs tokenizer.ggml.merges`);
    const pre = m.string('tokenizer.ggml.pre') ?? 'default';
    if (!(pre in PRE_SPLITS)) throw m.fail('tokenizer.ggml.pre', `is ${JSON.stringify(pre)}; the pre-tokenizers read are ${Object.keys(PRE_SPLITS).join(', ')}`);
    const split = PRE_SPLITS[pre]!;
    const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: split === null };
    tokenizerJson = {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: added,
      // Qwen's split comes with NFC (its tokenizer.json's normalizer).
      normalizer: split === QWEN2_SPLIT ? { type: 'NFC' } : null,
      pre_tokenizer: split === null ? byteLevel : { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: split }, behavior: 'Isolated', invert: false }, byteLevel] },
      post_processor: postProcessor ?? byteLevel,
      decoder: byteLevel,
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: split === LLAMA3_SPLIT, vocab, merges },
    };
  } else if (kind === GGML_SENTENCEPIECE) {
    const scores = m.array('tokenizer.ggml.scores', isNumber, 'number');
    if (!scores || scores.length !== tokens.length) throw new ModelFileError(`${file.path}: a llama (SentencePiece) tokenizer needs tokenizer.ggml.scores, one per token`);
    unk ??= tokens.find((_, id) => types[id] === TOKEN_TYPE.unknown);
    const prefix = m.bool('tokenizer.ggml.add_space_prefix') ?? true;
    tokenizerJson = {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: added,
      normalizer: { type: 'Sequence', normalizers: [...(prefix ? [{ type: 'Prepend', prepend: '▁' }] : []), { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
      pre_tokenizer: null,
      post_processor: postProcessor,
      decoder: {
        type: 'Sequence',
        decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, ...(prefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : [])],
      },
      model: { type: 'BPE', dropout: null, unk_token: unk ?? null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges: sentencepieceMerges(tokens, scores, types) },
    };
  } else {
    throw m.fail('tokenizer.ggml.model', `is ${JSON.stringify(kind)}; the tokenizers read are gpt2 (byte-level BPE) and llama (SentencePiece)`);
  }
  const config: Record<string, unknown> = {
    add_bos_token: addBos,
    add_eos_token: m.bool('tokenizer.ggml.add_eos_token') ?? false,
    bos_token: bos ?? null,
    eos_token: eos ?? null,
    unk_token: unk ?? null,
    pad_token: pad ?? null,
    clean_up_tokenization_spaces: false,
    tokenizer_class: 'PreTrainedTokenizerFast',
  };
  const template = m.string('tokenizer.chat_template');
  if (template !== undefined) config.chat_template = template;
  return { tokenizerJson, config };
}

/**
 * SentencePiece BPE as merges (transformers' `SentencePieceExtractor`): every split of a normal piece into two pieces
 * of the vocabulary is a merge, ranked by the whole piece's score (higher first), splits of one piece ordered by the
 * ids of their parts. Byte and control tokens take no part.
 */
export function sentencepieceMerges(tokens: string[], scores: number[], types: number[]): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((t, id) => {
    if (types[id] === TOKEN_TYPE.normal || types[id] === TOKEN_TYPE.userDefined) ids.set(t, id);
  });
  const found: { l: string; r: string; score: number; li: number; ri: number; order: number }[] = [];
  tokens.forEach((piece, id) => {
    if (!ids.has(piece)) return;
    const chars = Array.from(piece);
    const local: typeof found = [];
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join('');
      const r = chars.slice(k).join('');
      const li = ids.get(l);
      const ri = ids.get(r);
      if (li !== undefined && ri !== undefined) local.push({ l, r, score: scores[id]!, li, ri, order: 0 });
    }
    local.sort((a, b) => a.li - b.li || a.ri - b.ri);
    found.push(...local);
  });
  found.forEach((f, i) => {
    f.order = i;
  });
  found.sort((a, b) => b.score - a.score || a.order - b.order);
  return found.map((f) => [f.l, f.r]);
}
