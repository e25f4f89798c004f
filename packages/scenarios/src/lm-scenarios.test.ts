import { objectSpec } from '@flexhelm/core';
import { zipArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { BLIMP_URL, BLiMPScenario } from './blimp-scenario.js';
import { createScenario } from './scenario-registry.js';
import { instanceDigest } from './test-instance-digest.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';
import { TWITTER_AAE_URL, TwitterAAEScenario } from './twitter-aae-scenario.js';
import { WIKITEXT_103_URL, Wikitext103Scenario, wikitextDocuments } from './wikitext-103-scenario.js';

// Digests and texts below come from running HELM 0.2.1's own scenario classes on the same files (Python 3.11).
const wikitext = () =>
  Array.from({ length: 60 }, (_, d) => [' \n', ` = Doc ${d}\u2028 = \n`, ' \n', ` Text ${d} .\n`, ' \n', ` = = Section ${d} = = \n`, ' \n', ` More ${d} \u2028x\n`].join('')).join('');

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('language-modeling and minimal-pair scenarios', () => {
  it('wikitext_103 splits wiki.test.raw into its 60 articles', async () => {
    fixture = await sourceFixture({ [WIKITEXT_103_URL]: zipArchive({ 'wikitext-103-raw/wiki.test.raw': wikitext(), 'wikitext-103-raw/wiki.valid.raw': 'v' }) });
    const instances = await createScenario(objectSpec(Wikitext103Scenario.className, {})).getInstances(fixture.context);
    expect(instances).toHaveLength(60);
    expect(instances[1].input.text).toBe(' \n = Doc 1\u2028 = \n \n Text 1 .\n \n = = Section 1 = = \n \n More 1 \u2028x\n');
    expect(instanceDigest(instances)).toBe('935f809f9952f990fa5a7fbfe027c65f380806ef3c27fc336d56631cc2f6c25d');
    expect(wikitextDocuments([' \n', ' = A = \n', ' \n', 'x\n'])).toEqual([' \n = A = \n \nx\n']);
  });

  it('twitter_aae reads the first column of every csv row', async () => {
    fixture = await sourceFixture({ [`${TWITTER_AAE_URL}aa_tweets.csv`]: 'hello world\n"quoted, tweet",extra\n"multi\nline"\n' });
    const instances = await createScenario(objectSpec(TwitterAAEScenario.className, { demographic: 'aa' })).getInstances(fixture.context);
    expect(instances.map((i) => [i.input.text, i.references, i.split])).toEqual([
      ['hello world', [], 'test'],
      ['quoted, tweet', [], 'test'],
      ['multi\nline', [], 'test'],
    ]);
    expect(() => new TwitterAAEScenario('other')).toThrow(/Unsupported demographic/);
  });

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
    await expectOfflineError((context) => new Wikitext103Scenario().getInstances(context), WIKITEXT_103_URL);
  });
});
