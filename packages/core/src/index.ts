// The Python exception HELM raises for bad input lives with the Python semantics; it is part of the data model too.
export { HelmError, type PythonErrorClass } from '@flexhelm/python-compat';
export * from './helm-json.js';
export * from './object-spec.js';
export * from './adapter-spec.js';
export * from './perturbation-description.js';
export * from './instance.js';
export * from './request.js';
export * from './request-limits.js';
export * from './request-state.js';
export * from './run-spec.js';
export * from './stat.js';
export * from './tokenizer.js';
export * from './request-result-json.js';
export * from './boxed-answer.js';
export * from './run-output-schemas.js';
