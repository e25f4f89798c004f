import { objectSpec } from '@flexhelm/core';
import { zipArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';
import { instanceDigest } from './test-instance-digest.js';
import { WIKITEXT_103_URL, Wikitext103Scenario, wikitextDocuments } from './wikitext-103-scenario.js';

// Digest and text from running HELM 0.2.1's own Wikitext103Scenario on the same file (Python 3.11).
const wikitext = () =>
  Array.from({ length: 60 }, (_, d) => [' \n', ` = Doc ${d}\u2028 = \n`, ' \n', ` Text ${d} .\n`, ' \n', ` = = Section ${d} = = \n`, ' \n', ` More ${d} \u2028x\n`].join('')).join('');


let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('Wikitext103Scenario', () => {
  it('wikitext_103 splits wiki.test.raw into its 60 articles', async () => {
    fixture = await sourceFixture({ [WIKITEXT_103_URL]: zipArchive({ 'wikitext-103-raw/wiki.test.raw': wikitext(), 'wikitext-103-raw/wiki.valid.raw': 'v' }) });
    const instances = await createScenario(objectSpec(Wikitext103Scenario.className, {})).getInstances(fixture.context);
    expect(instances).toHaveLength(60);
    expect(instances[1]!.input.text).toBe(' \n = Doc 1\u2028 = \n \n Text 1 .\n \n = = Section 1 = = \n \n More 1 \u2028x\n');
    expect(instanceDigest(instances)).toBe('935f809f9952f990fa5a7fbfe027c65f380806ef3c27fc336d56631cc2f6c25d');
    expect(wikitextDocuments([' \n', ' = A = \n', ' \n', 'x\n'])).toEqual([' \n = A = \n \nx\n']);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new Wikitext103Scenario().getInstances(context), WIKITEXT_103_URL);
  });
});
