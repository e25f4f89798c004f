import { type SentencepieceSpecial, sentencepieceTokenizerJson } from './sentencepiece-tokenizer-files.js';
import { byteTokens, tooSmall, type FamilyTokenizerFiles, type FamilyTokenizerOptions } from './tokenizer-file-parts.js';

// microsoft/Phi-3.5-mini-instruct's template (Phi-3-mini's differs only in writing an empty system turn).
const PHI3_CHAT_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

/** Phi-3's added tokens after Llama 2's 32000, in id order; the role tokens eat the spaces after them (`rstrip`). */
const PHI3_ADDED = ['<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>', '<|placeholder4|>', '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>'];

/**
 * Phi-3 / Phi-3.5: Llama 2's sentencepiece tokenizer (`<unk>` `<s>` `</s>`, bytes, pieces; 32000 ids published) and
 * then its chat tokens (`<|endoftext|>` 32000 … `<|end|>` 32007 … `<|user|>` 32010). The embedding has more rows
 * (32064) than the tokenizer ids; the tokenizer adds no BOS (`add_bos_token` false, as the published files since mid 2024).
 */
export function phi3Files(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  const head = ['<unk>', '<s>', '</s>', ...byteTokens()];
  const min = head.length + PHI3_ADDED.length + 1;
  if (o.vocabSize < min) throw tooSmall('phi3-mini', o.vocabSize, min);
  const regular = Math.min(32_000, o.vocabSize - PHI3_ADDED.length);
  const tail: SentencepieceSpecial[] = PHI3_ADDED.map((content, i) => ({ id: regular + i, content, rstrip: content !== '<|endoftext|>' }));
  const tokenizerJson = sentencepieceTokenizerJson({ head, headSpecial: [0, 1, 2], tail, pieceCount: regular - head.length, prefixSpace: true, bos: { token: '<s>', id: 1 }, unk: '<unk>' });
  const config: Record<string, unknown> = {
    add_bos_token: false,
    add_eos_token: false,
    bos_token: '<s>',
    clean_up_tokenization_spaces: false,
    eos_token: '<|endoftext|>',
    legacy: false,
    model_max_length: o.maxLength ?? 4096,
    pad_token: '<|endoftext|>',
    padding_side: 'left',
    sp_model_kwargs: {},
    tokenizer_class: 'LlamaTokenizer',
    unk_token: '<unk>',
    use_default_system_prompt: false,
    ...(o.chat ? { chat_template: PHI3_CHAT_TEMPLATE } : {}),
  };
  const id = (content: string) => regular + PHI3_ADDED.indexOf(content);
  return {
    tokenizerJson,
    config,
    specialTokensMap: { bos_token: '<s>', eos_token: '<|endoftext|>', pad_token: '<|endoftext|>', unk_token: '<unk>' },
    // config.json's ids: bos 1 (never added), eos and pad <|endoftext|>.
    bosTokenId: 1,
    // Phi-3 Instruct's generation_config.json: <|end|>, <|assistant|> and <|endoftext|>.
    eosTokenIds: o.chat ? [id('<|end|>'), id('<|assistant|>'), id('<|endoftext|>')] : [id('<|endoftext|>')],
    padTokenId: id('<|endoftext|>'),
  };
}
