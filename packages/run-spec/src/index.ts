export { parseObjectSpec, parseArgValue, parseArgEntries, MAX_DESCRIPTION_LENGTH } from './parse-object-spec.js';
export { parseHocon, type HoconValue, type HoconObject } from './hocon.js';
export { parseRunEntries, readRunEntries } from './read-run-entries.js';
export { ALL_MODELS, MODEL_TAGS, getModel, registerLocalModel, getAllModels, getAllTextModels, getAllCodeModels, getModelNamesWithTag, type Model } from './model-registry.js';
export { PERTURBATION_SPECS } from './perturbation-specs.js';
export { RUN_EXPANDERS, MODEL_FAMILIES, MODEL_TO_TOKENIZER, replaceRunSpec, type RunExpander } from './run-expanders.js';
export { CANONICAL_RUN_SPEC_FUNCS } from './canonical-run-spec-functions.js';
export { bindArguments, type RunSpecFunction, type RunSpecResources, type BigBenchTask, type Param } from './run-spec-function.js';
export { constructRunSpecs, alterRunSpec, type ConstructOptions } from './construct-run-specs.js';
export { closeMatches, MAX_CLOSE_MATCH_LENGTH } from './close-matches.js';
export { checkScenarioSpec, MMLU_SUBJECTS, PLAIN_NAME } from './scenario-argument-checks.js';
export { runEntriesToRunSpecs, type RunEntriesOptions } from './run-entries-to-run-specs.js';
export { descriptionForModel } from './description-for-model.js';
// The data model a caller of this package handles, from @flexhelm/core, so one install and one import suffice.
export { HelmError, type RunSpec, type RunEntry, type ObjectSpec, type ScenarioSpec, type MetricSpec, type AdapterSpec, type DataAugmenterSpec, type ArgValue } from '@flexhelm/core';
