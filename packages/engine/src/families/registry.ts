import type { ModelDescription } from '@flexhelm/contract';
import { ModelFileError } from '../model-file-error.js';
import { readConfigJson, readModelText } from '../read-model-text.js';
import { join } from 'node:path';
import type { FamilyBase, FamilyEntry } from './family-entry.js';
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

/** Every family's make-model bases by name (`llama-3.2-1b`, `gemma-2-2b`, …), each from its family folder. */
export const FAMILY_BASES: Readonly<Record<string, FamilyBase>> = Object.fromEntries([...FAMILY_REGISTRY.values()].flatMap((f) => Object.entries(f.make.bases)));

/** The family entry whose bases hold `base`, or undefined. */
export function familyOfBase(base: string): FamilyEntry | undefined {
  return [...FAMILY_REGISTRY.values()].find((f) => Object.hasOwn(f.make.bases, base));
}

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

/**
 * The family of a config.json object: its `model_type`, or without one (the facebook/opt-* files HELM's runs were
 * made with predate the key) OPT's, recognised by OPT's own `ffn_dim` field.
 */
export function familyOfConfig(json: Record<string, unknown>, source = 'config.json'): FamilyEntry {
  return familyEntry(json.model_type === undefined && 'ffn_dim' in json ? optFamily.modelType : json.model_type, source);
}

/**
 * The description of a model folder as the session and the engine read it, through its family entry (a family with
 * its own config reader, OPT, reads the folder itself). A folder whose config.json has no `model_type`, or is not
 * JSON, goes to OPT's reader, whose messages name the problem.
 */
export function readFolderModel(dir: string): ModelDescription {
  const path = join(dir, 'config.json');
  const text = readModelText(path, 'model config', ' (a model folder needs the Hugging Face config.json)');
  let type: unknown;
  try {
    type = (JSON.parse(text) as { model_type?: unknown } | null)?.model_type;
  } catch {
    type = undefined;
  }
  const entry = familyEntry(type ?? optFamily.modelType, path);
  return entry.readFolder ? entry.readFolder(dir) : readModelDescription(dir);
}

/** make-model's `--config` for a config.json object: the family's own conversion, or its first base with the file's fields. */
export function makeConfigFromHf(json: Record<string, unknown>, source: string): Record<string, unknown> {
  const entry = familyOfConfig(json, source);
  if (entry.makeConfigFromHf) return entry.makeConfigFromHf(json, source);
  const base = Object.keys(entry.make.bases)[0];
  if (base === undefined) throw new ModelFileError(`${source}: make-model has no base for model_type ${JSON.stringify(entry.modelType)}`);
  const { model_type: _t, architectures: _a, torch_dtype: _d, transformers_version: _v, _name_or_path: _n, ...fields } = json;
  return { base, ...fields };
}
