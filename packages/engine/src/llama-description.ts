/**
 * The Llama-family names kept for callers of the time before `families/`: config parsing now lives in one folder
 * per family (`families/<model_type>/`) behind the registry (`families/registry.ts`).
 */
import type { ModelDescription } from '@flexhelm/contract';
import { ModelFileError } from './model-file-error.js';
import { describeHfConfig } from './families/registry.js';

export type { RotaryLayerTensorKey } from './families/llama-style-tensors.js';

/** The keys of a Llama/Mistral/Qwen2 decoder layer's tensors (the other rotary families add norms: `RotaryLayerTensorKey`). */
export type LlamaLayerTensorKey = 'qW' | 'qB' | 'kW' | 'kB' | 'vW' | 'vB' | 'oW' | 'oB' | 'inNormW' | 'postNormW' | 'gateW' | 'gateB' | 'upW' | 'upB' | 'downW' | 'downB';
export { describeHfConfig, readModelDescription } from './families/registry.js';

/** A Llama-family description (token ids may be unset: configs often leave `pad_token_id` out). */
export type LlamaDescription = ModelDescription<LlamaLayerTensorKey>;

/** Every key a Llama layer holds; a description with another (OPT's LayerNorms, Gemma 2's sandwich norms, OLMo 2's q/k norms, experts) is not one. */
const LLAMA_LAYER_KEYS: ReadonlySet<string> = new Set<LlamaLayerTensorKey>(['qW', 'qB', 'kW', 'kB', 'vW', 'vB', 'oW', 'oB', 'inNormW', 'postNormW', 'gateW', 'gateB', 'upW', 'upB', 'downW', 'downB']);

/**
 * Parses a `config.json` object of a family whose layer is Llama's (Llama, Mistral, Qwen2: pre-RMSNorm, rotary,
 * SwiGLU, these tensors only); `source` names the file in errors. Decided by the description's tensors, not by name.
 */
export function llamaDescriptionFromHf(json: unknown, source = 'config.json'): LlamaDescription {
  const d = describeHfConfig(json, source);
  const other = d.layerTensors.map((t) => t.key).filter((k) => !LLAMA_LAYER_KEYS.has(k));
  if (other.length > 0 || d.moe !== undefined || d.positions.kind !== 'rope' || d.norm.kind !== 'rmsnorm' || d.norm.placement !== 'pre') {
    throw new ModelFileError(`${source}: model_type is ${JSON.stringify(d.family)}, whose layer is not Llama's (${other.length > 0 ? `it holds ${other.join(', ')}` : 'other kinds'}); describeHfConfig reads it`);
  }
  return d as LlamaDescription;
}
