export * from './model-description.js';
export * from './decoder-backend.js';
export type { EmbeddingWeights, HeadWeights, LayerWeights } from './weights.js';
export { MASK_BIAS } from './mask-bias.js';
export { PhaseTotals, reportPhase, timePhase, timingLine, timingsEnabled } from './phase-timings.js';
export * from './decoder.js';
export * from './generate.js';
export { argmax, logSumExp, topK, sampleToken, processedLogits, type SamplingSettings } from './sampling.js';
export { hashName, SeededUniform } from './seeded-uniform.js';
