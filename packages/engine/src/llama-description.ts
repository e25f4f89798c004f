/**
 * The Llama-family names kept for callers of the time before `families/`: config parsing now lives in one folder
 * per family (`families/<model_type>/`) behind the registry (`families/registry.ts`).
 */
import type { ModelDescription } from '@flexhelm/contract';
import { ModelFileError } from './model-file-error.js';
import { familyEntry } from './families/registry.js';

export type { RotaryLayerTensorKey } from './families/llama-style-tensors.js';

/** The keys of a Llama/Mistral/Qwen2 decoder layer's tensors (the other rotary families add norms: `RotaryLayerTensorKey`). */
export type LlamaLayerTensorKey = 'qW' | 'qB' | 'kW' | 'kB' | 'vW' | 'vB' | 'oW' | 'oB' | 'inNormW' | 'postNormW' | 'gateW' | 'gateB' | 'upW' | 'upB' | 'downW' | 'downB';
export { describeHfConfig, readModelDescription } from './families/registry.js';

/** A Llama-family description (token ids may be unset: configs often leave `pad_token_id` out). */
export interface LlamaDescription extends ModelDescription<LlamaLayerTensorKey> {
  family: 'llama' | 'mistral' | 'qwen2';
}

const FAMILIES = ['llama', 'mistral', 'qwen2'] as const;

/** Parses a Llama/Mistral/Qwen2 `config.json` object; `source` names the file in errors. */
export function llamaDescriptionFromHf(json: unknown, source = 'config.json'): LlamaDescription {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ModelFileError(`${source}: is not a JSON object`);
  const family = (json as { model_type?: unknown }).model_type;
  if (!FAMILIES.includes(family as never)) throw new ModelFileError(`${source}: model_type is ${JSON.stringify(family)}; this reads ${FAMILIES.join(', ')}`);
  return familyEntry(family, source).describe(json, source) as LlamaDescription;
}
