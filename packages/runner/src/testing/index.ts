export * from './tiny-opt-model.js';
