import { describe } from 'vitest';
import { familyRunTests } from './test-family-runs.js';

// flexhelm run and serve on the default path (test-family-runs.ts): Qwen2 and the mixtures of experts.
describe('flexhelm run on the default path: Qwen2, Mixtral, Qwen2-MoE', () => {
  familyRunTests(['qwen2', 'mixtral', 'qwen2_moe']);
});
