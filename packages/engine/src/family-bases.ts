/**
 * The published shapes `make-model` builds on, as the `config.json` fields of the models on the Hub. Each family keeps
 * its own under `families/<model_type>/` (its entry's `make.bases`); token ids there are the published ones, and
 * `makeHubModel` replaces them with the ids of the tokenizer it writes.
 */

/**
 * The tokenizer a family ships (see `@flexhelm/tokenizer`'s `familyTokenizerFiles`): Llama 3's tiktoken-converted
 * byte-level BPE, Qwen2's byte-level BPE, Llama 2 / Mistral's sentencepiece BPE, Gemma's sentencepiece BPE (no
 * prefix space, 256000 ids), Phi-3's (Llama 2's plus its chat tokens) and OLMo 2's cl100k-style byte-level BPE.
 */
export type FamilyTokenizerStyle = 'llama3' | 'qwen2' | 'sentencepiece' | 'gemma' | 'phi3' | 'olmo2';

export interface FamilyBase {
  /** The Hub repository the shape is taken from. */
  repo: string;
  tokenizer: FamilyTokenizerStyle;
  /** config.json fields except `architectures`, `torch_dtype` and `transformers_version`. */
  config: Record<string, unknown>;
}
