import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { BOOLQ_CONTRAST_URL, BOOLQ_URL, BoolQScenario, boolqInput } from './boolq-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const TRAIN = [
  { question: 'is the sky blue', passage: 'The sky is blue.', answer: true },
  { question: '  does ice MELT at 0 degrees ', passage: 'Water freezes at 0.', answer: false },
];
const DEV = [
  { question: 'is paris in france', passage: 'Paris is the capital of France.', answer: true },
  { question: 'ist straße long', passage: 'A street.', answer: false },
];
const CONTRAST = {
  data: [
    { header: 1 },
    {
      question: 'is paris in france',
      answer: 'TRUE',
      perturbed_questions: [
        { perturbed_q: 'is paris in germany', answer: 'FALSE' },
        { perturbed_q: 'is paris a city in france', answer: 'TRUE' },
        { perturbed_q: '', answer: 'FALSE' },
      ],
    },
    { question: 'is the sky blue', answer: 'TRUE', perturbed_questions: [{ perturbed_q: 'is the sky green', answer: 'FALSE' }] },
  ],
};
const jsonl = (rows: object[]) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');
const yes = (text: string) => [{ output: { text }, tags: ['correct'] }];

// What HELM 0.2.1's BoolQScenario builds from these files (computed with Python 3.11).
const EXPECTED = [
  { input: { text: 'The sky is blue.\nQuestion: Is the sky blue?' }, references: yes('Yes'), split: 'train' },
  { input: { text: 'Water freezes at 0.\nQuestion: Does ice melt at 0 degrees?' }, references: yes('No'), split: 'train' },
  {
    input: { text: 'Paris is the capital of France.\nQuestion: Is paris in france?' },
    references: yes('Yes'),
    split: 'valid',
    contrast_inputs: [{ text: 'Paris is the capital of France.\nQuestion: Is paris in germany?' }],
    contrast_references: [yes('No')],
  },
  { input: { text: 'A street.\nQuestion: Ist straße long?' }, references: yes('No'), split: 'valid' },
];

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('BoolQScenario', () => {
  it('reads train/dev and attaches answer-flipping contrast questions to dev', async () => {
    fixture = await sourceFixture({
      [`${BOOLQ_URL}train.jsonl`]: jsonl(TRAIN),
      [`${BOOLQ_URL}dev.jsonl`]: jsonl(DEV),
      [BOOLQ_CONTRAST_URL]: JSON.stringify(CONTRAST),
    });
    const instances = await createScenario(objectSpec(BoolQScenario.className, {})).getInstances(fixture.context);
    expect(JSON.parse(JSON.stringify(instances))).toEqual(EXPECTED);
    const contrastOnly = await createScenario(objectSpec(BoolQScenario.className, { only_contrast: true })).getInstances(fixture.context);
    expect(contrastOnly.map((i) => i.input.text)).toEqual(EXPECTED.slice(0, 3).map((i) => i.input.text));
  });

  it('formats questions as HELM (strip, capitalize, "?") and refuses one that already has "?"', () => {
    expect(boolqInput('P', ' \u0085can it\u00a0 ').text).toBe('P\nQuestion: Can it?');
    expect(() => boolqInput('P', 'really?')).toThrow(/already ends with/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new BoolQScenario().getInstances(context), `${BOOLQ_URL}train.jsonl`);
  });
});
