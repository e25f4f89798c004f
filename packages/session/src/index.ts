export * from './decide-backend.js';
export * from './open-engine.js';
export { EngineSetupError } from '@flexhelm/runner';
export * from './model-names.js';
export * from './policy-request.js';
export * from './open-session.js';
export * from './command-line-message.js';
export { selectBackend, createFastestBackend, type SelectBackendOptions, type BackendSelection } from './select-backend.js';
