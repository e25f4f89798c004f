import { describe } from 'vitest';
import { familyRunTests } from './test-family-runs.js';

// flexhelm run and serve on the default path (test-family-runs.ts) for the instruct folders: Gemma 2, Phi-3, OLMo 2.
describe('flexhelm run on the default path: Gemma 2, Phi-3, OLMo 2', () => {
  familyRunTests(['gemma2', 'phi3', 'olmo2']);
});
