export * from './helm-schema.js';
export * from './table.js';
export * from './summarize-suite.js';
export * from './run-display.js';
export * from './read-suite-runs.js';
export * from './read-summary.js';
export { aggregateRowWinRates, statBareStr } from './group-tables.js';
export * from './warning-digest.js';
