import { pythonLines } from '@flexhelm/python-compat';
import { objectSpec } from '@flexhelm/core';
import { tarArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { BABI_URL, BabiQAScenario, babiInstances, babiPath } from './babi-qa-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const TASK1 =
  '1 Mary moved to the bathroom.\n2 John went to the hallway.\n3 Where is Mary? \tbathroom\t1\n4 Daniel went back  to the hallway.\n' +
  '5 Where is Daniel? \thallway\t4\n1 Sandra journeyed to the garden.\n2 Where is Sandra?\tgarden\t1\n';
const TASK19 = '1 The office is east of the hallway.\n2 How do you go from the hallway to the office?\ts,w\t1\n';
// HELM 0.2.1's [input, answer, split] for these files, computed with Python 3.11.
const TASK1_EXPECTED = [
  ['Mary moved to the bathroom.\nJohn went to the hallway.\nQuestion: Where is Mary?', 'bathroom', 'train'],
  ['Mary moved to the bathroom.\nJohn went to the hallway.\nDaniel went back  to the hallway.\nQuestion: Where is Daniel?', 'hallway', 'train'],
  ['Sandra journeyed to the garden.\nQuestion: Where is Sandra?', 'garden', 'train'],
];
const rows = (instances: { input: { text: string }; references: { output: { text: string } }[]; split?: string }[]) =>
  instances.map((i) => [i.input.text, i.references[0]!.output.text, i.split]);

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('BabiQAScenario', () => {
  it('reads en-valid train/valid/test of the chosen task from the archive', async () => {
    const files: Record<string, string> = {};
    for (const split of ['train', 'valid', 'test']) {
      files[`tasks_1-20_v1-2/en-valid/qa1_${split}.txt`] = split === 'train' ? TASK1 : `1 A b.\n2 Q ${split}?\tx\t1\n`;
      files[`tasks_1-20_v1-2/en-valid/qa19_${split}.txt`] = TASK19;
    }
    fixture = await sourceFixture({ [BABI_URL]: tarArchive(files, { gzip: true }) });
    const instances = await createScenario(objectSpec(BabiQAScenario.className, { task: '1' })).getInstances(fixture.context);
    expect(rows(instances)).toEqual([...TASK1_EXPECTED, ['A b.\nQuestion: Q valid?', 'x', 'valid'], ['A b.\nQuestion: Q test?', 'x', 'test']]);
    const task19 = await new BabiQAScenario(19).getInstances(fixture.context);
    expect(rows(task19)[2]).toEqual(['The office is east of the hallway.\nQuestion: How do you go from the hallway to the office?', 'south west', 'test']);
  });

  it('parses stories, task 19 paths and task arguments like HELM', () => {
    expect(rows(babiInstances(pythonLines(TASK1), 1, 'train'))).toEqual(TASK1_EXPECTED);
    expect(babiPath('n,e,e')).toBe('north east east');
    expect(() => babiPath('x')).toThrow(/KeyError|one of n, s, e, w/);
    expect(new BabiQAScenario('all').tasks).toHaveLength(20);
    expect(() => new BabiQAScenario('21')).toThrow(/does not exist/);
    expect(() => new BabiQAScenario('one')).toThrow(/invalid literal/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new BabiQAScenario(1).getInstances(context), BABI_URL);
  });
});
