import { parseObjectSpec } from './parse-object-spec.js';

/**
 * The description with its `model=` argument (a family such as `text`, or a HELM model) replaced by the local model
 * that will actually run, or `model=<name>` appended when there is none: FlexLLMGen ran `model=text` descriptions
 * as `ai21/j1-jumbo` (the family's first model), which named the runs after a model that never ran.
 */
export function descriptionForModel(description: string, model: string): string {
  const spec = parseObjectSpec(description);
  const colon = description.indexOf(':');
  if (colon < 0) return `${description}:model=${model}`;
  const args = description.slice(colon + 1).split(',');
  const kept = args.filter((a) => a.slice(0, a.indexOf('=')).trim() !== 'model');
  if (!('model' in spec.args)) return `${description},model=${model}`;
  // The model expander's position decides where `model=` appears in the run name: keep it.
  const at = args.findIndex((a) => a.slice(0, a.indexOf('=')).trim() === 'model');
  kept.splice(at, 0, `model=${model}`);
  return `${description.slice(0, colon)}:${kept.join(',')}`;
}
