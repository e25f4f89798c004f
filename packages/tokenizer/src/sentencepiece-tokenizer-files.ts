import type { TokenizerJson } from './hugging-face-tokenizer.js';
import { bosTemplate, bpeModel, byteTokens, sentencepiecePieces, special, tooSmall, type FamilyTokenizerFiles, type FamilyTokenizerOptions } from './tokenizer-file-parts.js';

const MISTRAL_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

/** A special token of a sentencepiece tokenizer.json (`rstrip`: it eats the spaces after it, as Phi-3's role tokens). */
export interface SentencepieceSpecial {
  id: number;
  content: string;
  rstrip?: boolean;
}

export interface SentencepieceLayout {
  /** Tokens at ids 0… in order (specials, placeholders, the 256 byte tokens); the pieces follow them. */
  head: string[];
  /** Ids in `head` that are special added tokens. */
  headSpecial: number[];
  /** Added tokens past the pieces (Phi-3's chat tokens at 32000…), which the pieces leave room for. */
  tail?: SentencepieceSpecial[];
  /** How many ids the pieces take. */
  pieceCount: number;
  /** Llama's converter prepends `▁` to the text (the sentencepiece `add_dummy_prefix`); Gemma's does not. */
  prefixSpace: boolean;
  splitDigits?: boolean;
  bos: { token: string; id: number };
  unk: string;
}

/**
 * A sentencepiece BPE tokenizer.json as transformers' converters write them (`LlamaConverter`, `GemmaConverter`):
 * spaces replaced by `▁` (and one prepended where the model adds a dummy prefix), no pre-tokenizer, BPE with byte
 * fallback, a decoder that undoes both (stripping the prepended space), BOS by a template.
 */
export function sentencepieceTokenizerJson(l: SentencepieceLayout): TokenizerJson {
  const { pieces, merges } = sentencepiecePieces(l.pieceCount, new Set([...l.head, ...(l.tail ?? []).map((t) => t.content)]), { splitDigits: l.splitDigits ?? false });
  const vocab = Object.fromEntries([...l.head, ...pieces].map((t, i) => [t, i]));
  const replace = { type: 'Replace', pattern: { String: ' ' }, content: '▁' };
  const decoders: unknown[] = [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }];
  if (l.prefixSpace) decoders.push({ type: 'Strip', content: ' ', start: 1, stop: 0 });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [...l.headSpecial.map((id) => special(id, l.head[id]!)), ...(l.tail ?? []).map((t) => special(t.id, t.content, t.rstrip ?? false))],
    normalizer: l.prefixSpace ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, replace] } : replace,
    pre_tokenizer: null,
    post_processor: bosTemplate(l.bos.token, l.bos.id),
    decoder: { type: 'Sequence', decoders },
    model: bpeModel(vocab, merges, { unk_token: l.unk, fuse_unk: true, byte_fallback: true }),
  };
}

/** Llama 2 / Mistral: `<unk>` `<s>` `</s>`, the 256 `<0xNN>` byte tokens, then pieces; exactly `vocabSize` ids. */
export function sentencepieceFiles(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  const head = ['<unk>', '<s>', '</s>', ...byteTokens()];
  if (o.vocabSize < head.length + 1) throw tooSmall('sentencepiece', o.vocabSize, head.length + 1);
  const tokenizerJson = sentencepieceTokenizerJson({ head, headSpecial: [0, 1, 2], pieceCount: o.vocabSize - head.length, prefixSpace: true, bos: { token: '<s>', id: 1 }, unk: '<unk>' });
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
