import { tarArchive } from '@flexhelm/downloads/testing';
import { objectSpec, type Instance } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { MMLU_DATA_URL, MMLUScenario, mmluInstances } from './mmlu-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

// csv files in data.tar's layout; dev uses \r\n line ends and a quoted multi-line question.
const DEV = `Which term describes the body's ability to maintain its normal state?,Anabolism,Catabolism,Tolerance,Homeostasis,D\r\n"A ""quoted"" question, with a comma\r\nand a newline",1,2,2,3,C\r\n`;
const VAL = 'Café or tea?,café,tea,both,none,A\n';
const TEST = '"What is 2+2?",3,4,5,6,B\nLast line without newline,x,y,z,w,D';

const refs = (answers: string[], correct: number[]) => answers.map((text, i) => ({ output: { text }, tags: correct.includes(i) ? ['correct'] : [] }));
// What HELM 0.2.1's MMLUScenario builds from these files (computed with Python 3.11's csv module).
const EXPECTED: Instance[] = [
  { input: { text: "Which term describes the body's ability to maintain its normal state?" }, references: refs(['Anabolism', 'Catabolism', 'Tolerance', 'Homeostasis'], [3]), split: 'train' },
  { input: { text: 'A "quoted" question, with a comma\nand a newline' }, references: refs(['1', '2', '2', '3'], [1, 2]), split: 'train' },
  { input: { text: 'Café or tea?' }, references: refs(['café', 'tea', 'both', 'none'], [0]), split: 'valid' },
  { input: { text: 'What is 2+2?' }, references: refs(['3', '4', '5', '6'], [1]), split: 'test' },
  { input: { text: 'Last line without newline' }, references: refs(['x', 'y', 'z', 'w'], [3]), split: 'test' },
];

const plain = (instances: Instance[]) => JSON.parse(JSON.stringify(instances)) as unknown;

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('MMLUScenario', () => {
  it('downloads data.tar, reads dev/val/test (no auxiliary_train for the subject) in HELM order', async () => {
    fixture = await sourceFixture({
      [MMLU_DATA_URL]: tarArchive({
        'data/dev/anatomy_dev.csv': DEV,
        'data/val/anatomy_val.csv': VAL,
        'data/test/anatomy_test.csv': TEST,
        'data/test/astronomy_test.csv': 'Other subject?,a,b,c,d,A\n',
        'data/auxiliary_train/arc_easy.csv': 'q,a,b,c,d,A\n',
      }),
    });
    const logs: string[] = [];
    const scenario = createScenario(objectSpec(MMLUScenario.className, { subject: 'anatomy' }));
    expect(scenario.name).toBe('mmlu');
    const instances = await scenario.getInstances({ ...fixture.context, log: (m) => logs.push(m) });
    expect(plain(instances)).toEqual(EXPECTED);
    expect(logs.some((m) => m.endsWith("anatomy_auxiliary_train.csv doesn't exist, skipping"))).toBe(true);

    // A second run uses the unpacked files: no new request, even offline.
    const again = await new MMLUScenario('anatomy').getInstances({ ...fixture.context, offline: true });
    expect(plain(again)).toEqual(EXPECTED);
    expect(fixture.server.requests).toHaveLength(1);
  });

  it('offline without the data names the URL and the folder to fill', async () => {
    await expectOfflineError((context) => new MMLUScenario('anatomy').getInstances(context), MMLU_DATA_URL);
  });

  it('rejects a row whose answer letter has no answer, as HELM (KeyError)', () => {
    expect(() => mmluInstances(['Q?,a,b,C\n'], 'test')).toThrow(/KeyError|answer letter/);
    expect(() => createScenario(objectSpec(MMLUScenario.className, {}))).toThrow(/missing required argument 'subject'/);
  });
});
