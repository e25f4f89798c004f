export * from './measured.js';
export * from './machine-profile.js';
export * from './profile-machine.js';
export * from './profile-cache.js';
export * from './predict-cost.js';
export * from './search-policy.js';
export * from './drift-monitor.js';
export * from './auto-policy.js';
