import type { Tokenizer } from '@flexhelm/core';
import { familyEntry, generationTokenIds, type Engine } from '@flexhelm/engine';

/**
 * The token a text prompt's model input starts with, as the model's Hugging Face tokenizer gives it (HELM 0.2.1's
 * client feeds `tokenizer(prompt)` to the model). The family entry says where it comes from: config.json's BOS
 * (OPT's `</s>`, which its tokenizer adds), or what the folder's tokenizer adds (`<s>`, `<|begin_of_text|>`, `<bos>`),
 * none where it adds none (Qwen2 names `<|endoftext|>` as `bos_token_id` but never prepends it; Phi-3, OLMo 2). A
 * tokenizer that does not say falls back to config.json's BOS.
 */
export function promptBosId(engine: Engine, tokenizer: Tokenizer): number | undefined {
  if (familyEntry(engine.description.family).tokens.promptBos === 'config' || !('bosTokenId' in tokenizer)) return generationTokenIds(engine.description).bos;
  return (tokenizer as { bosTokenId: number | undefined }).bosTokenId;
}

/**
 * A text prompt's model input: its ids with the BOS `promptBosId` gives prepended unless the prompt already starts
 * with it. An empty prompt without a BOS starts with config.json's (a forward pass needs one token).
 */
export function promptInput(ids: number[], engine: Engine, tokenizer: Tokenizer): { ids: number[]; addedBos: boolean } {
  const bos = promptBosId(engine, tokenizer) ?? (ids.length === 0 ? generationTokenIds(engine.description).bos : undefined);
  if (bos === undefined || ids[0] === bos) return { ids, addedBos: false };
  return { ids: [bos, ...ids], addedBos: true };
}
