import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { objectSpec } from '@flexhelm/core';
import { zstdFrame } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';
import { THE_PILE_INDICES_URL, THE_PILE_URL, ThePileScenario } from './the-pile-scenario.js';

const TEXTS = (i: number) => [`plain ${i}`, `line\r\nbreak ${i}`, `comma, "quote" ${i}`, '', `cr\ronly ${i}`, ` lead space ${i}\n`][i % 6];
const DOCS = Array.from({ length: 12 }, (_, i) => ({ text: TEXTS(i), meta: { pile_set_name: ['Github', 'PhilPapers', 'ArXiv'][i % 3] } }));
// HELM 0.2.1's own ThePileScenario on this test set (Python 3.11), with indices [3, 0, 3, -1, 1] for github.
const EXPECTED = { Github: ['', 'plain 0', '', ''], PhilPapers: ['line\nbreak 1', 'cr\nonly 4', 'line\nbreak 7', 'cr\nonly 10'] };

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('ThePileScenario', () => {
  it('splits the test set into per-subset csv files and keeps the subsample indices', async () => {
    fixture = await sourceFixture({
      [THE_PILE_URL]: zstdFrame(DOCS.map((d) => `${JSON.stringify(d)}\n`).join('')),
      [`${THE_PILE_INDICES_URL}github/group0.json`]: '[3, 0, 3, -1, 1]',
    });
    const github = await createScenario(objectSpec(ThePileScenario.className, { subset: 'Github' })).getInstances(fixture.context);
    expect(github.map((i) => i.input.text)).toEqual(EXPECTED.Github);
    const philPapers = await new ThePileScenario('PhilPapers').getInstances(fixture.context);
    expect(philPapers.map((i) => i.input.text)).toEqual(EXPECTED.PhilPapers);
    // The cache files are written in Python's csv dialect.
    expect(await readFile(join(fixture.context.outputPath, 'ArXiv.csv'), 'utf8')).toBe(
      '"comma, ""quote"" 2"\r\n" lead space 5\n"\r\n"comma, ""quote"" 8"\r\n" lead space 11\n"\r\n',
    );
    expect(await readFile(join(fixture.context.outputPath, 'Books3.csv'), 'utf8')).toBe('');
  });

  it('validates the subset and works offline only with data', async () => {
    expect(() => new ThePileScenario('Reddit')).toThrow(/Unknown Pile subset/);
    await expectOfflineError((context) => new ThePileScenario('ArXiv').getInstances(context), THE_PILE_URL);
  });
});
