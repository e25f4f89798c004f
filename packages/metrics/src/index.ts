export * from './stat.js';
export * from './metric-name-key.js';
export * from './normalize-text.js';
export * from './score-functions.js';
export * from './porter-stemmer.js';
export * from './rouge.js';
export * from './punkt-sentence-tokenizer.js';
export * from './word-tokenize.js';
export * from './bleu.js';
export * from './math-equiv.js';
export * from './calibration.js';
export * from './metric.js';
export * from './basic-metric.js';
export * from './tokens-metric.js';
export * from './classification-metric.js';
export * from './bbq-metric.js';
export * from './data-stats.js';
export * from './summarization-metric.js';
export * from './not-computed-metric.js';
export * from './metric-registry.js';
export * from './evaluate-run-spec-metrics.js';
export * from './bias-word-lists.js';
export * from './bias-metric.js';
export * from './memo.js';
// Score functions and stats carry Python's int/float distinction (HELM writes `1` vs `1.0`): `PyNumber` is a
// number or a boxed integral float; `toNumber` gives the plain value. Re-exported so callers need no other import.
export { PyFloat, toNumber, type PyNumber } from '@flexhelm/python-compat';
export { HelmError, type Stat, type MetricName, type ScenarioState, type RequestState, type WindowService } from '@flexhelm/core';
