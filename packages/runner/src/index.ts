export * from './request-executor.js';
export * from './truncate-sequence.js';
export * from './engine-executor.js';
export * from './caching-executor.js';
export * from './run-one.js';
