// The pure cost model lives in @flexhelm/cost-model; it is re-exported so importers of the whole pipeline need one package.
export * from '@flexhelm/cost-model';
export * from './profile-machine.js';
export * from './profiled-model.js';
export * from './profile-cache.js';
export * from './auto-policy.js';
export * from './calibrate.js';
export * from './run-policy.js';
export * from './profiling-error.js';
