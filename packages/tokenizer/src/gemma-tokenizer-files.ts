import { sentencepieceTokenizerJson } from './sentencepiece-tokenizer-files.js';
import { byteTokens, tooSmall, type FamilyTokenizerFiles, type FamilyTokenizerOptions } from './tokenizer-file-parts.js';

// google/gemma-2-2b-it's template: no system role, "assistant" written "model", each turn trimmed.
const GEMMA_CHAT_TEMPLATE =
  "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

/**
 * Gemma / Gemma 2: `<pad>` `<eos>` `<bos>` `<unk>` `<mask>` at 0–4, `[@BOS@]` and `<unused0>`…`<unused99>` up to 105,
 * `<start_of_turn>` 106 and `<end_of_turn>` 107 (the published ids), then the 256 byte tokens and the pieces, up to
 * `vocabSize` ids (256000 published). Unlike Llama's, the text gets no `▁` prepended and digits are pieces of their own.
 */
export function gemmaFiles(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  const specials = ['<pad>', '<eos>', '<bos>', '<unk>', '<mask>', '[@BOS@]'];
  for (let n = 0; specials.length < 106; n++) specials.push(`<unused${n}>`);
  specials.push('<start_of_turn>', '<end_of_turn>');
  const head = [...specials, ...byteTokens()];
  if (o.vocabSize < head.length + 1) throw tooSmall('gemma', o.vocabSize, head.length + 1);
  const tokenizerJson = sentencepieceTokenizerJson({
    head,
    headSpecial: specials.map((_, i) => i),
    pieceCount: o.vocabSize - head.length,
    prefixSpace: false,
    splitDigits: true,
    bos: { token: '<bos>', id: 2 },
    unk: '<unk>',
  });
  const config: Record<string, unknown> = {
    add_bos_token: true,
    add_eos_token: false,
    additional_special_tokens: ['<start_of_turn>', '<end_of_turn>'],
    bos_token: '<bos>',
    clean_up_tokenization_spaces: false,
    eos_token: '<eos>',
    model_max_length: o.maxLength ?? 8192,
    pad_token: '<pad>',
    sp_model_kwargs: {},
    spaces_between_special_tokens: false,
    tokenizer_class: 'GemmaTokenizer',
    unk_token: '<unk>',
    use_default_system_prompt: false,
    ...(o.chat ? { chat_template: GEMMA_CHAT_TEMPLATE } : {}),
  };
  return {
    tokenizerJson,
    config,
    specialTokensMap: { bos_token: '<bos>', eos_token: '<eos>', pad_token: '<pad>', unk_token: '<unk>' },
    bosTokenId: 2,
    // gemma-2-*-it's generation_config.json stops at <eos> and <end_of_turn>.
    eosTokenIds: o.chat ? [1, 107] : [1],
    padTokenId: 0,
  };
}
