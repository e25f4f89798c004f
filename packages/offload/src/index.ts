export * from './policy.js';
export * from './model-shape.js';
export * from './placement.js';
export * from './memory-plan.js';
export * from './offloading-backend.js';
export * from './tiered-kv-cache.js';
export * from './tiered-embedding.js';
export * from './format-tier-summary.js';
