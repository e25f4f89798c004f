import { pyListdir } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { objectSpec } from '@flexhelm/core';
import { tarArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { IMDB_CONTRAST_URL, IMDB_URL, IMDBScenario, imdbContrastMap } from './imdb-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const REVIEWS: Record<string, string> = {
  'aclImdb/train/pos/0_9.txt': ' Great movie!\n',
  'aclImdb/train/pos/1_8.txt': 'Loved it<br />',
  'aclImdb/train/pos/5_7.txt': 'Fine.',
  'aclImdb/train/neg/2_1.txt': 'Bad.\r\n',
  'aclImdb/train/unsup/9_0.txt': 'ignored',
  'aclImdb/test/pos/3_10.txt': 'Superb',
  'aclImdb/test/neg/4_2.txt': 'Awful film',
  'aclImdb/README': 'readme',
};
const tsv = (rows: string[]) => `Sentiment\tText\n${rows.join('\n')}\n`;

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('IMDBScenario', () => {
  it('reads aclImdb in os.listdir order and moves reviews with contrast versions to valid', async () => {
    fixture = await sourceFixture({
      [IMDB_URL]: tarArchive(REVIEWS, { gzip: true }),
      [`${IMDB_CONTRAST_URL}test_original.tsv`]: tsv(['Negative\tAwful film']),
      [`${IMDB_CONTRAST_URL}test_contrast.tsv`]: tsv(['Positive\tWonderful film']),
      [`${IMDB_CONTRAST_URL}dev_original.tsv`]: tsv(['Positive\tGreat movie!']),
      [`${IMDB_CONTRAST_URL}dev_contrast.tsv`]: tsv(['Negative\tTerrible movie!']),
    });
    const instances = await createScenario(objectSpec(IMDBScenario.className, {})).getInstances(fixture.context);
    const data = join(fixture.context.outputPath, 'data');
    // HELM's order: train/pos, train/neg, test/pos, test/neg, each folder as os.listdir lists it.
    const order: string[] = [];
    for (const folder of ['train/pos', 'train/neg', 'test/pos', 'test/neg']) {
      for (const file of await pyListdir(join(data, folder))) order.push(REVIEWS[`aclImdb/${folder}/${file}`]!.trim());
    }
    expect(instances.map((i) => i.input.text)).toEqual(order);

    const byText = new Map(instances.map((i) => [i.input.text, JSON.parse(JSON.stringify(i)) as unknown]));
    const yes = (t: string) => [{ output: { text: t }, tags: ['correct'] }];
    expect(byText.get('Great movie!')).toEqual({
      input: { text: 'Great movie!' },
      references: yes('Positive'),
      split: 'valid',
      contrast_inputs: [{ text: 'Terrible movie!' }],
      contrast_references: [yes('Negative')],
    });
    expect(byText.get('Loved it<br />')).toEqual({ input: { text: 'Loved it<br />' }, references: yes('Positive'), split: 'train' });
    expect(byText.get('Bad.')).toEqual({ input: { text: 'Bad.' }, references: yes('Negative'), split: 'train' });
    expect(byText.get('Superb')).toEqual({ input: { text: 'Superb' }, references: yes('Positive'), split: 'valid' });
    expect(byText.get('Awful film')).toMatchObject({ split: 'valid', contrast_inputs: [{ text: 'Wonderful film' }], contrast_references: [yes('Positive')] });

    const onlyContrast = await new IMDBScenario(true).getInstances(fixture.context);
    expect(onlyContrast.map((i) => i.input.text).sort()).toEqual(['Awful film', 'Bad.', 'Fine.', 'Great movie!', 'Loved it<br />']);
  });

  it('checks the contrast files', () => {
    expect(() => imdbContrastMap(['Positive\ta\tb\n'], ['Negative\tc\n'], 'test')).toThrow(/label<TAB>text/);
    expect(() => imdbContrastMap(['Meh\ta\n'], ['Negative\tc\n'], 'test')).toThrow(/Positive\/Negative/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new IMDBScenario().getInstances(context), IMDB_URL);
  });
});
