import { dictEntries, pyError, shortRepr } from '@flexhelm/python-compat';
import type { ObjectSpec, RunSpec } from '@flexhelm/core';
import { ADAPT_GENERATION, ADAPT_MULTIPLE_CHOICE_JOINT } from './adapter-spec-builders.js';
import { CANONICAL_RUN_SPEC_FUNCS } from './canonical-run-spec-functions.js';
import { MODEL_TAGS, getModel } from './model-registry.js';
import { bindArguments, type RunSpecResources } from './run-spec-function.js';
import { RUN_EXPANDERS } from './run-expanders.js';
import { closeMatches } from './close-matches.js';
import { checkScenarioSpec } from './scenario-argument-checks.js';

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
  /**
   * Refuse scenario arguments that name files but are not one of HELM's values (or a plain name where HELM has no
   * list): a ValueError here instead of a failure, or a read outside the data folder, when the scenario runs. On by
   * default; HELM 0.2.1 itself does not check, so comparisons with HELM turn it off.
   */
  checkScenarioArguments?: boolean;
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
      `Unknown run spec name: ${name.length > 80 ? shortRepr(name) : name}` +
        (name === '' ? ' (the description is empty; it must start with a run-spec name such as mmlu or boolq)' : '') +
        (close.length ? `; did you mean ${close.join(', ')}?` : `; known names: ${[...CANONICAL_RUN_SPEC_FUNCS.keys()].join(', ')}`),
    );
  }
  const entries = dictEntries(spec.args);
  const expanders = entries.filter(([key]) => RUN_EXPANDERS.has(key)).map(([key, value]) => RUN_EXPANDERS.get(key)!(value));
  const args = bindArguments(fn, entries.filter(([key]) => !RUN_EXPANDERS.has(key)));
  let runSpecs = [fn.build(args, options.resources ?? {})];
  for (const expander of expanders) runSpecs = runSpecs.flatMap((rs) => expander.expand(rs));
  runSpecs = runSpecs.map(alterRunSpec);
  if (options.checkScenarioArguments !== false) for (const rs of runSpecs) checkScenarioSpec(rs.scenario_spec);
  return runSpecs;
}
