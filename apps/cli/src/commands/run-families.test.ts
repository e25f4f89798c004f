import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAMILY_REGISTRY } from '@flexhelm/engine';
import { FAMILY_FOLDERS, familyRunTests, flexhelm, scenario } from './test-family-runs.js';

// flexhelm run and serve on the default path (test-family-runs.ts), for OPT and the Llama family; the other families
// are in run-families-chat.test.ts and run-families-moe.test.ts.
describe('flexhelm run on the default path: OPT, Llama, Mistral', () => {
  it('covers every family of the registry (over the three run-families files)', () => {
    expect(Object.keys(FAMILY_FOLDERS).sort()).toEqual([...FAMILY_REGISTRY.keys()].sort());
  });

  const { root, dataDir } = familyRunTests(['opt', 'llama', 'mistral']);

  it('a fixed --percent with a profile that has other shapes only runs (no drift figures to compare with)', () => {
    const other = join(root, 'opt-other');
    expect(flexhelm(['make-model', '--config', '{"base":"opt-125m","hiddenSize":32,"numHiddenLayers":2,"numAttentionHeads":2,"ffnDim":64}', '--out', other]).status).toBe(0);
    const r = flexhelm(['run', '-d', scenario, '--max-eval-instances', '2', '-t', '1', '--model', other, '--percent', '100', '0', '100', '0', '100', '0', '--output-path', join(root, 'out-other'), '--data-dir', dataDir, '--offline']);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(r.status, r.stderr).toBe(0);
  }, 300_000);
});
