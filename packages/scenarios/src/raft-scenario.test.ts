import { objectSpec } from '@flexhelm/core';
import { describe, expect, it } from 'vitest';
import { RAFTScenario, raftSourceFiles } from './raft-scenario.js';
import { createScenario } from './scenario-registry.js';

describe('RAFTScenario', () => {
  it('validates the subset as HELM and refuses to build instances it cannot reproduce, naming the files', async () => {
    expect(() => createScenario(objectSpec(RAFTScenario.className, { subset: 'banking77' }))).toThrow(/Unknown subset: banking77/);
    const scenario = createScenario(objectSpec(RAFTScenario.className, { subset: 'overruling' }));
    const error = (await scenario.getInstances({ outputPath: '/nonexistent', offline: true }).then(
      () => undefined,
      (e: unknown) => e,
    )) as Error | undefined;
    expect(error?.message).toContain('cannot be built yet');
    expect(error?.message).toContain(raftSourceFiles('overruling')[1]);
  });
});
