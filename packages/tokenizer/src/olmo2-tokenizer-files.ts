import { cl100kTokenizerJson, tooSmall, type FamilyTokenizerFiles, type FamilyTokenizerOptions } from './tokenizer-file-parts.js';

// allenai/OLMo-2-1124-7B-Instruct's template: turns end with a newline; an assistant turn with the EOS.
const OLMO2_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\n'  + message['content'] + eos_token + '\n' }}{% else %}{{ '<|assistant|>\n'  + message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}{% endfor %}";

/** OLMo 2's special tokens after cl100k's 100256 ranks: `<|endoftext|>` +1, FIM +2…+4, `<|endofprompt|>` +20, `<|pad|>` +21. */
function olmo2Specials(): string[] {
  const names = ['<|extra_id_0|>', '<|endoftext|>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>'];
  for (let n = 1; names.length < 20; n++) names.push(`<|extra_id_${n}|>`);
  names.push('<|endofprompt|>', '<|pad|>');
  return names;
}

/**
 * OLMo 2: GPT-2-style byte-level BPE over cl100k's split pattern (digits in threes, as Llama 3), 100256 regular ids,
 * then its special tokens (`<|endoftext|>` 100257 is EOS, `<|pad|>` 100277 pad); the embedding has 100352 rows. The
 * tokenizer adds no BOS and config.json has none (`bos_token_id` null); the chat template starts with `bos_token`,
 * which is `<|endoftext|>`.
 */
export function olmo2Files(o: FamilyTokenizerOptions): FamilyTokenizerFiles {
  const names = olmo2Specials();
  if (o.vocabSize < 256 + names.length + 1) throw tooSmall('dolma2', o.vocabSize, 256 + names.length + 1);
  const regular = Math.min(100_256, o.vocabSize - names.length);
  const id = (name: string) => regular + names.indexOf(name);
  const tokenizerJson = cl100kTokenizerJson(regular, names);
  const config: Record<string, unknown> = {
    add_bos_token: false,
    add_eos_token: false,
    add_prefix_space: false,
    bos_token: '<|endoftext|>',
    clean_up_tokenization_spaces: false,
    eos_token: '<|endoftext|>',
    model_max_length: o.maxLength ?? 4096,
    pad_token: '<|pad|>',
    tokenizer_class: 'GPT2Tokenizer',
    unk_token: '<|endoftext|>',
    ...(o.chat ? { chat_template: OLMO2_CHAT_TEMPLATE } : {}),
  };
  return {
    tokenizerJson,
    config,
    specialTokensMap: { bos_token: '<|endoftext|>', eos_token: '<|endoftext|>', pad_token: '<|pad|>', unk_token: '<|endoftext|>' },
    bosTokenId: undefined,
    eosTokenIds: [id('<|endoftext|>')],
    padTokenId: id('<|pad|>'),
  };
}
