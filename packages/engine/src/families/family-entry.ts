import type { FamilyName, ModelDescription } from '@flexhelm/contract';

/**
 * The published shapes `make-model` builds on, as the `config.json` fields of the models on the Hub. Each family keeps
 * its own (`<model_type>-bases.ts`, its entry's `make.bases`); token ids there are the published ones, and
 * `makeHubModel` replaces them with the ids of the tokenizer it writes.
 */
/**
 * The tokenizer a family ships, by the tokenizer's name (`@flexhelm/tokenizer`'s `familyTokenizerFiles`, which knows
 * no family): Llama 3's tiktoken-converted byte-level BPE, Qwen's byte-level BPE, Llama 2 / Mistral's sentencepiece
 * BPE, Gemma's sentencepiece BPE (no prefix space, 256000 ids), Phi-3-mini's (Llama 2's plus its chat tokens) and
 * OLMo 2's dolma2 (cl100k-style byte-level BPE).
 */
export type FamilyTokenizerStyle = 'llama3' | 'qwen' | 'sentencepiece' | 'gemma' | 'phi3-mini' | 'dolma2';

export interface FamilyBase {
  /** The Hub repository the shape is taken from. */
  repo: string;
  tokenizer: FamilyTokenizerStyle;
  /** config.json fields except `architectures`, `torch_dtype` and `transformers_version`. */
  config: Record<string, unknown>;
}

/** What `make-model` needs to write a random checkpoint of a family in the Hub layout. */
interface FamilyMaking {
  /** The `architectures` entry transformers writes. */
  architecture: string;
  /** Published shapes by base name; the first is the one a config.json of this family builds on. Empty for OPT (its sizes are `knownOptNames`). */
  bases: Readonly<Record<string, FamilyBase>>;
  /**
   * Fills the config.json fields transformers derives from ones the user overrode (`head_dim` from a changed hidden
   * size, Qwen2's `max_window_layers`, Phi-3's longrope factor lists): `hf` is base + overrides, changed in place.
   */
  derive?(hf: Record<string, unknown>, overrides: Record<string, unknown>): void;
}

/** Reads one of a GGUF file's `<architecture>.<key>` metadata values (undefined when absent; a bad value is an error). */
export interface GgufKeyReader {
  number(key: string): number | undefined;
  /** A non-negative integer. */
  count(key: string): number | undefined;
}

/** A GGUF metadata entry a family writes under `<architecture>.`: a float32 or a uint32. */
export interface GgufKeyValue {
  key: string;
  type: 'f32' | 'u32';
  value: number;
}

/**
 * How llama.cpp's GGUF files hold the family (what `@flexhelm/gguf`'s `importGguf`/`exportGguf` read here instead of
 * branching on a name): the architecture, the tensor names and layouts, and the family's own metadata keys.
 */
export interface FamilyGguf {
  /** `general.architecture` llama.cpp writes for the family (Mistral's files are `llama`). */
  architecture: string;
  /** Whether a file of `architecture` imports as this family (false for Mistral: its files read back as Llama). */
  imports: boolean;
  /** `rms_norm_eps` when the file has no `attention.layer_norm_rms_epsilon` (the family config's default). */
  rmsNormEps: number;
  /** config.json has `head_dim` (from `attention.key_length`); without, key_length must be hidden / heads. */
  headDimKey: boolean;
  /** llama.cpp's per-layer tensor names (within `blk.N.`) that differ from Llama's → the Hugging Face names. */
  layerNames?: Readonly<Record<string, string>>;
  /** llama.cpp's converter interleaves each head's q/k rows for its GPT-J rotary (the llama architecture only). */
  permutedRotary: boolean;
  /** RMSNorm weights are stored as 1 + w (Gemma's graphs multiply by the stored weight). */
  normPlusOne: boolean;
  /** Llama 3.1 rope scaling as a `rope_freqs` tensor, and `attention_bias`/`mlp_bias` from which tensors exist. */
  llamaExtras: boolean;
  /** longrope as `rope_factors_long`/`rope_factors_short` tensors and `rope.scaling.original_context_length`. */
  longropeFactors: boolean;
  /** The window is stored as `attention.sliding_window` (else llama.cpp's graph has none: export warns). */
  slidingWindow: boolean;
  /**
   * Mixture-of-experts files: `<architecture>.expert_count` above 0, each sparse layer's router as `ffn_gate_inp`
   * and its experts as one 3-D tensor per projection (`ffn_{gate,up,down}_exps`, experts outermost), a shared expert
   * as `ffn_*_shexp`. A file of `architecture` imports as the family whose `experts` matches whether it has experts
   * (Mixtral's files are `llama` with experts). The expert counts and sizes are the family's own keys.
   */
  experts?: boolean;
  /** config.json fields from the family's own keys (`m` reads `<architecture>.<key>`; sizes as the file states them). */
  readConfig?(m: GgufKeyReader, sizes: { layers: number; hidden: number; heads: number; headDim: number }): Record<string, unknown>;
  /**
   * The family's own keys for a description (export), before `attention.sliding_window`; a model llama.cpp's graph
   * would compute differently is a `ModelFileError` (`config`: the folder's config.json, for the message).
   */
  writeKeys?(d: ModelDescription, config: Record<string, unknown>): GgufKeyValue[];
}

/**
 * One model family as a plug-in: what `model_type` in config.json selects. Everything family-specific about reading
 * a model lives behind this entry (the config quirks, the checkpoint names inside the description it returns, fused
 * tensors as `checkpointRows`, the tokenizer and chat conventions, make-model's bases), so nothing outside
 * `families/` branches on a family name.
 */
export interface FamilyEntry {
  modelType: FamilyName;
  /** Parses and checks a config.json object; every bad field is a one-line `ModelFileError` naming it (`source`: the file). */
  describe(json: unknown, source: string): ModelDescription;
  /**
   * BOS/EOS policy of the family's checkpoints: whether prompts start with the BOS token (the HF tokenizer's
   * `add_bos_token`), and that generation stops at the config's EOS id. `promptBos`: where a text prompt's BOS id comes
   * from, `config` (OPT: HELM's client prepends config.json's `</s>`) or `tokenizer` (what the folder's tokenizer adds,
   * none where it adds none). `window`: HELM's own window service for the family (`helm-opt`: LocalOPTWindowService)
   * or one read from the model folder (`model-folder`).
   */
  tokens: { prependBos: boolean; promptBos: 'config' | 'tokenizer'; window: 'helm-opt' | 'model-folder' };
  /**
   * Chat conventions: the end-of-turn markers the family's instruct templates write (`<end_of_turn>`, `<|end|>`):
   * a chat completion stops at each that the tokenizer holds as one token, besides the EOS ids.
   */
  chat: { endOfTurn: readonly string[] };
  make: FamilyMaking;
  /**
   * A family that keeps its own config reader (OPT: its messages, also for a config.json that is not JSON) reads a
   * model folder here; the others are described from config.json by `describe`.
   */
  readFolder?(dir: string): ModelDescription;
  /** The family in llama.cpp's GGUF files; absent: GGUF import/export refuses it. */
  gguf?: FamilyGguf;
  /** make-model's `--config` from a config.json of this family (default: the first base with the file's fields over it). */
  makeConfigFromHf?(json: Record<string, unknown>, source: string): Record<string, unknown>;
}
