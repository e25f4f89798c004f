import type { ModelDescription } from '../model-description.js';
import { ModelFileError } from '../model-file-error.js';
import { readConfigJson } from '../read-model-text.js';
import type { FamilyEntry } from './family-entry.js';
import { gemma2Family } from './gemma2/gemma2-family.js';
import { llamaFamily } from './llama/llama-family.js';
import { mistralFamily } from './mistral/mistral-family.js';
import { mixtralFamily } from './mixtral/mixtral-family.js';
import { olmo2Family } from './olmo2/olmo2-family.js';
import { optFamily } from './opt/opt-family.js';
import { phi3Family } from './phi3/phi3-family.js';
import { qwen2Family } from './qwen2/qwen2-family.js';
import { qwen2MoeFamily } from './qwen2_moe/qwen2-moe-family.js';

export type { FamilyEntry } from './family-entry.js';

/** Every family flexhelm reads, keyed by config.json's `model_type` (one folder each under `families/`). */
export const FAMILY_REGISTRY: ReadonlyMap<string, FamilyEntry> = new Map(
  [optFamily, llamaFamily, mistralFamily, qwen2Family, gemma2Family, phi3Family, olmo2Family, mixtralFamily, qwen2MoeFamily].map((f) => [f.modelType, f]),
);

/** The registry entry for a `model_type`; an unknown one is a `ModelFileError` listing the known ones. */
export function familyEntry(modelType: unknown, source = 'config.json'): FamilyEntry {
  const entry = typeof modelType === 'string' ? FAMILY_REGISTRY.get(modelType) : undefined;
  if (!entry) throw new ModelFileError(`${source}: model_type is ${JSON.stringify(modelType)}; supported: ${[...FAMILY_REGISTRY.keys()].join(', ')}`);
  return entry;
}

/** Any supported `config.json` object → its description, through the registry entry its `model_type` names. */
export function describeHfConfig(json: unknown, source = 'config.json'): ModelDescription {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ModelFileError(`${source}: is not a JSON object`);
  return familyEntry((json as { model_type?: unknown }).model_type, source).describe(json, source);
}

/** Reads `<dir>/config.json` (a regular file of bounded size, see `readModelText`) into a description. */
export function readModelDescription(dir: string): ModelDescription {
  const { json, path } = readConfigJson(dir);
  return describeHfConfig(json, path);
}
