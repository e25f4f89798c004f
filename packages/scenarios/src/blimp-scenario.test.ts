import { objectSpec } from '@flexhelm/core';
import { zipArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';
import { BLIMP_URL, BLiMPScenario } from './blimp-scenario.js';
import { instanceDigest } from './test-instance-digest.js';

// Digest from running HELM 0.2.1's own BLiMPScenario on the same files (Python 3.11).

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('BLiMPScenario', () => {
  it('blimp reads the paradigms of a phenomenon from the zip', async () => {
    fixture = await sourceFixture({
      [BLIMP_URL]: zipArchive({
        'data/anaphor_gender_agreement.jsonl': `${JSON.stringify({ sentence_good: "Katherine can't help herself.", sentence_bad: "Katherine can't help himself." })}\n`,
        'data/anaphor_number_agreement.jsonl': `${JSON.stringify({ sentence_good: 'Many girls insulted themselves.', sentence_bad: 'Many girls insulted herself.' })}\n`,
        '__MACOSX/data/._x': 'x',
      }),
    });
    const instances = await createScenario(objectSpec(BLiMPScenario.className, { phenomenon: 'anaphor_agreement' })).getInstances(fixture.context);
    expect(instances[0]).toMatchObject({ input: { text: '' }, split: 'test' });
    expect(instanceDigest(instances)).toBe('f47a71e086ca432abfbdaecd2dfab8dab8dbe568af41beffdfe2af2e7c8e1b7b');
    expect(() => new BLiMPScenario('syntax')).toThrow(/Unsupported phenomenon/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new BLiMPScenario('binding').getInstances(context), BLIMP_URL);
  });
});
