export * from './check-result.js';
export * from './run-conformance.js';
