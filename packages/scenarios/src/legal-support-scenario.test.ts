import { objectSpec } from '@flexhelm/core';
import { zipArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { LEGAL_SUPPORT_URL, LegalSupportScenario } from './legal-support-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const row = (context: string, a: string, b: string, label: string) =>
  `${JSON.stringify({ context, citation_a: { signal: 'see', parenthetical: a }, citation_b: { signal: 'cf', parenthetical: b }, label })}\n`;

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('LegalSupportScenario', () => {
  it('reads train/dev/test from the zip; the labelled parenthetical is correct', async () => {
    fixture = await sourceFixture({
      [LEGAL_SUPPORT_URL]: zipArchive({
        'legal_support/train.jsonl': row('Passage one.', 'holding X', 'holding Y', 'b'),
        'legal_support/dev.jsonl': row('Passage two.', 'same', 'same', 'a'),
        'legal_support/test.jsonl': row('Passage three.', 'P', 'Q', 'a'),
        '__MACOSX/legal_support/._train.jsonl': 'x',
      }),
    });
    const instances = await createScenario(objectSpec(LegalSupportScenario.className, {})).getInstances(fixture.context);
    const yes = (t: string) => ({ output: { text: t }, tags: ['correct'] });
    const no = (t: string) => ({ output: { text: t }, tags: [] });
    expect(JSON.parse(JSON.stringify(instances))).toEqual([
      { input: { text: 'Passage one.' }, references: [no('holding X'), yes('holding Y')], split: 'train' },
      { input: { text: 'Passage two.' }, references: [yes('same'), yes('same')], split: 'valid' },
      { input: { text: 'Passage three.' }, references: [yes('P'), no('Q')], split: 'test' },
    ]);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new LegalSupportScenario().getInstances(context), LEGAL_SUPPORT_URL);
  });
});
