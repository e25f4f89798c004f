import type { ObjectSpec, RunSpec } from '@flexhelm/core';
import { ADAPT_GENERATION, ADAPT_MULTIPLE_CHOICE_JOINT } from './adapter-spec-builders.js';
import { CANONICAL_RUN_SPEC_FUNCS } from './canonical-run-spec-functions.js';
import { MODEL_TAGS, getModel } from './model-registry.js';
import { dictEntries } from './py-dict.js';
import { pyError } from './python-values.js';
import { bindArguments, type RunSpecResources } from './run-spec-function.js';
import { RUN_EXPANDERS } from './run-expanders.js';

/** Names in `candidates` close to `name` (shared prefix or edit distance ≤ 3), best first. */
export function closeMatches(name: string, candidates: Iterable<string>, limit = 5): string[] {
  const distance = (a: string, b: string): number => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let diag = row[0]!;
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const up = row[j]!;
        row[j] = Math.min(up + 1, row[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
        diag = up;
      }
    }
    return row[b.length]!;
  };
  return [...candidates]
    .map((c) => ({ c, d: distance(name.toLowerCase(), c.toLowerCase()) }))
    .filter(({ c, d }) => name.length > 0 && (d <= 3 || c.startsWith(name) || name.startsWith(c) || c.includes(name)))
    .sort((x, y) => x.d - y.d)
    .slice(0, limit)
    .map(({ c }) => c);
}

/**
 * HELM's `alter_run_spec`: models that strip newlines get `stop=hash` when generating, UL2 gets `global_prefix=nlg`.
 * Unknown models are a ValueError here.
 */
export function alterRunSpec(runSpec: RunSpec): RunSpec {
  const model = getModel(runSpec.adapter_spec.model);
  let altered = runSpec;
  const method = altered.adapter_spec.method;
  if (model.tags.includes(MODEL_TAGS.noNewlines) && (method === ADAPT_GENERATION || method === ADAPT_MULTIPLE_CHOICE_JOINT)) {
    altered = RUN_EXPANDERS.get('stop')!('hash').expand(altered)[0]!; // one run spec in, one out
  }
  if (model.tags.includes(MODEL_TAGS.nlgPrefix)) {
    altered = RUN_EXPANDERS.get('global_prefix')!('nlg').expand(altered)[0]!;
  }
  return altered;
}

// Names people reach for that are arguments of another run-spec function in HELM 0.2.1.
const ARGUMENT_HINTS: ReadonlyMap<string, string> = new Map([
  ['hellaswag', 'commonsense:dataset=hellaswag,method=multiple_choice_separate_original'],
  ['openbookqa', 'commonsense:dataset=openbookqa,method=multiple_choice_separate_calibrated'],
  ['commonsenseqa', 'commonsense:dataset=commonsenseqa,method=multiple_choice_separate_calibrated'],
  ['data_imputation', 'entity_data_imputation:dataset=...'],
  ['xsum', 'summarization_xsum'],
  ['cnndm', 'summarization_cnndm'],
  ['humaneval', 'code:dataset=humaneval'],
  ['apps', 'code:dataset=apps'],
]);

export interface ConstructOptions {
  /** Data HELM downloads while building `raft` and `big_bench` run specs. */
  resources?: RunSpecResources;
}

/**
 * HELM's `construct_run_specs(spec)`: the run-spec function named `spec.class_name` called with the non-expander
 * arguments, then every run expander in description order (cartesian product, parent order kept), then
 * {@link alterRunSpec} on each result.
 */
export function constructRunSpecs(spec: ObjectSpec, options: ConstructOptions = {}): RunSpec[] {
  const name = spec.class_name;
  const fn = CANONICAL_RUN_SPEC_FUNCS.get(name);
  if (!fn) {
    const hint = ARGUMENT_HINTS.get(name);
    const close = hint ? [hint] : closeMatches(name, CANONICAL_RUN_SPEC_FUNCS.keys());
    throw pyError(
      'ValueError',
      `Unknown run spec name: ${name}` +
        (name === '' ? ' (the description is empty; it must start with a run-spec name such as mmlu or boolq)' : '') +
        (close.length ? `; did you mean ${close.join(', ')}?` : `; known names: ${[...CANONICAL_RUN_SPEC_FUNCS.keys()].join(', ')}`),
    );
  }
  const entries = dictEntries(spec.args);
  const expanders = entries.filter(([key]) => RUN_EXPANDERS.has(key)).map(([key, value]) => RUN_EXPANDERS.get(key)!(value));
  const args = bindArguments(fn, entries.filter(([key]) => !RUN_EXPANDERS.has(key)));
  let runSpecs = [fn.build(args, options.resources ?? {})];
  for (const expander of expanders) runSpecs = runSpecs.flatMap((rs) => expander.expand(rs));
  return runSpecs.map(alterRunSpec);
}
