import type { ModelDescription } from '@flexhelm/contract';
import { optDescriptionByName } from './families/opt/opt-description.js';
import { FAMILY_BASES } from './families/registry.js';
import { describeHfConfig } from './llama-description.js';
import { knownHubBases, resolveHubConfig } from './make-hub-model.js';

/**
 * A built-in model shape by name, the one way callers name one: a published OPT size (`opt-1.3b`,
 * `facebook/opt-iml-max-30b`, case-insensitive) or a make-model base of another family (`llama-3.2-1b`, `qwen2-0.5b`,
 * `gemma-2-2b`, …). An unknown name is an error listing the known ones.
 */
export function descriptionByName(name: string): ModelDescription {
  if (Object.hasOwn(FAMILY_BASES, name)) return describeHfConfig(resolveHubConfig(name).hf, name);
  const opt = optDescriptionByName(name);
  if (opt) return opt;
  throw new Error(`unknown model "${name}"; known names: ${knownHubBases().join(', ')} (or pass a model folder with config.json)`);
}
