import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';
import { TWITTER_AAE_URL, TwitterAAEScenario } from './twitter-aae-scenario.js';

// Expected texts from running HELM 0.2.1's own TwitterAAEScenario on the same file (Python 3.11).

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('TwitterAAEScenario', () => {
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

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new TwitterAAEScenario('white').getInstances(context), `${TWITTER_AAE_URL}white_tweets.csv`);
  });
});
