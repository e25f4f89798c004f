import { objectSpec } from '@flexhelm/core';
import { zipArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { COMMONSENSE_URLS, CommonSenseScenario } from './commonsense-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const jsonl = (rows: object[]) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');
const choices = (texts: string[]) => texts.map((text, i) => ({ text, label: 'ABCDE'[i] }));
/** [question, answers with a * on the correct ones, split] */
const summarise = (instances: { input: { text: string }; references: { output: { text: string }; tags: string[] }[]; split?: string }[]) =>
  instances.map((i) => [i.input.text, i.references.map((r) => (r.tags.includes('correct') ? `*${r.output.text}` : r.output.text)), i.split]);

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const run = async (dataset: string) => summarise(await createScenario(objectSpec(CommonSenseScenario.className, { dataset })).getInstances(fixture!.context));

describe('CommonSenseScenario', () => {
  it('hellaswag: upper-cases ctx_b\'s first character (Python str.upper) and reads train then val', async () => {
    fixture = await sourceFixture({
      [`${COMMONSENSE_URLS.hellaswag}hellaswag_train.jsonl`]: jsonl([
        { activity_label: 'Baking', ctx_a: 'A man mixes flour.', ctx_b: 'ßhe then', endings: ['a', 'b', 'c', 'd'], label: -1 },
      ]),
      [`${COMMONSENSE_URLS.hellaswag}hellaswag_val.jsonl`]: jsonl([{ activity_label: 'Run', ctx_a: 'She runs.', ctx_b: '', endings: ['w', 'x', 'x', 'z'], label: 1 }]),
    });
    expect(await run('hellaswag')).toEqual([
      ['Baking: A man mixes flour. SShe then', ['a', 'b', 'c', '*d'], 'train'],
      ['Run: She runs. ', ['w', '*x', '*x', 'z'], 'valid'],
    ]);
  });

  it('openbookqa from the zip (train, test) and commonsenseqa (train, dev → valid)', async () => {
    const obqa = (stem: string, key: string) => ({ id: '1', question: { stem, choices: choices(['p', 'q', 'r', 's']) }, answerKey: key });
    fixture = await sourceFixture({
      [COMMONSENSE_URLS.openbookqa]: zipArchive({
        'OpenBookQA-V1-Sep2018/Data/Main/train.jsonl': jsonl([obqa('Sun is a', 'C')]),
        'OpenBookQA-V1-Sep2018/Data/Main/test.jsonl': jsonl([obqa('Moon is a', 'A')]),
        'OpenBookQA-V1-Sep2018/Data/Main/dev.jsonl': jsonl([obqa('unused', 'B')]),
      }),
      [`${COMMONSENSE_URLS.commonsenseqa}train_rand_split.jsonl`]: jsonl([{ answerKey: 'E', question: { stem: 'Where?', choices: choices(['1', '2', '3', '4', '5']) } }]),
      [`${COMMONSENSE_URLS.commonsenseqa}dev_rand_split.jsonl`]: jsonl([{ answerKey: 'B', question: { stem: 'Who?', choices: choices(['1', '2', '3', '4', '5']) } }]),
    });
    expect(await run('openbookqa')).toEqual([
      ['Sun is a', ['p', 'q', '*r', 's'], 'train'],
      ['Moon is a', ['*p', 'q', 'r', 's'], 'test'],
    ]);
    expect(await run('commonsenseqa')).toEqual([
      ['Where?', ['1', '2', '3', '4', '*5'], 'train'],
      ['Who?', ['1', '*2', '3', '4', '5'], 'valid'],
    ]);
  });

  it('piqa and siqa pair data lines with their label files', async () => {
    const siqa = { context: 'Tracy lent a book.', question: 'Why?', answerA: 'to help', answerB: 'to annoy', answerC: 'to sell' };
    fixture = await sourceFixture({
      [`${COMMONSENSE_URLS.piqa}train.jsonl`]: jsonl([{ goal: 'Open a jar', sol1: 'twist', sol2: 'smash' }]),
      [`${COMMONSENSE_URLS.piqa}train-labels.lst`]: '0\n',
      [`${COMMONSENSE_URLS.piqa}valid.jsonl`]: jsonl([{ goal: 'Dry hair', sol1: 'oven', sol2: 'towel' }]),
      [`${COMMONSENSE_URLS.piqa}valid-labels.lst`]: ' 1 \n',
      // The real zip also holds a __MACOSX folder, so HELM's folder keeps the inner socialiqa-train-dev level.
      [COMMONSENSE_URLS.siqa]: zipArchive({
        'socialiqa-train-dev/train.jsonl': jsonl([siqa]),
        'socialiqa-train-dev/train-labels.lst': '1\n',
        'socialiqa-train-dev/dev.jsonl': jsonl([siqa]),
        'socialiqa-train-dev/dev-labels.lst': '3\n',
        '__MACOSX/._train.jsonl': 'x',
      }),
    });
    expect(await run('piqa')).toEqual([
      ['Open a jar', ['*twist', 'smash'], 'train'],
      ['Dry hair', ['oven', '*towel'], 'valid'],
    ]);
    expect(await run('siqa')).toEqual([
      ['Tracy lent a book. Why?', ['*to help', 'to annoy', 'to sell'], 'train'],
      ['Tracy lent a book. Why?', ['to help', 'to annoy', '*to sell'], 'valid'],
    ]);
  });

  it('rejects unknown datasets and works offline only with data', async () => {
    expect(() => new CommonSenseScenario('arc')).toThrow(/Unknown commonsense dataset "arc"/);
    await expectOfflineError((context) => new CommonSenseScenario('openbookqa').getInstances(context), COMMONSENSE_URLS.openbookqa);
  });
});
