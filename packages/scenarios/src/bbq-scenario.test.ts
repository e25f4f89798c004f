import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { BBQ_BASE_URL, BBQ_CATEGORIES, BBQScenario } from './bbq-scenario.js';
import { createScenario } from './scenario-registry.js';
import { instanceDigest } from './test-instance-digest.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

// 1100 BBQ-shaped lines spread over the 11 categories, exercising unknown answers, every target-group rule (including
// HELM's operator-precedence quirk in the Race_x_SES rule) and the train/test cut. The digests were computed by running
// HELM 0.2.1's own BBQScenario on the same files (Python 3.11).
const GROUPS = [['old'], ['Black'], ['African American'], ['Latino'], ['low SES'], ['Black', 'old']];
const INFO0 = ['old', 'F-Black', 'M-African American', 'Latino-ish', 'lowSES', 'lowSES-M-Black', 'lowSES-Black'];
const INFO1 = ['nonOld', 'White', 'Asian', 'lowSES-F-Black', 'highSES', 'old'];
const line = (i: number) => ({
  example_id: i,
  question_polarity: i % 2 === 0 ? 'neg' : 'nonneg',
  context_condition: i % 3 === 0 ? 'ambig' : 'disambig',
  context: `Context ${i}.`,
  question: `Who is ${i}?`,
  ans0: `A${i}`,
  ans1: `B${i % 7}`,
  ans2: i % 5 === 0 ? `C${i}` : 'Unknown',
  label: i % 3,
  answer_info: {
    ans0: [`x${i}`, INFO0[i % 7]],
    ans1: [`y${i}`, INFO1[i % 6]],
    ans2: i % 5 === 0 ? ['z', 'zz'] : ['unknown', i % 4 ? 'Unknown' : 'Not known'],
  },
  additional_metadata: { stereotyped_groups: GROUPS[i % 6] },
});
const ALL_DIGEST = 'f553c948f1225f158deb63c5f7d52cde0f1c1c306bf4ee7cf090d9f59ef7c597';
const SES_DIGEST = '4d1d2a54e559428bd9daba19f4ff45d5b03345eccedc9adb710967b0db3dc305';

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('BBQScenario', () => {
  it('shuffles all categories with random.seed(0), keeps the last 1000 for test, and tags references as HELM', async () => {
    const files = Object.fromEntries(BBQ_CATEGORIES.map((c) => [`${BBQ_BASE_URL}${c}.jsonl`, '']));
    for (let i = 0; i < 1100; i++) files[`${BBQ_BASE_URL}${BBQ_CATEGORIES[i % 11]}.jsonl`] += `${JSON.stringify(line(i))}\n`;
    fixture = await sourceFixture(files);
    const all = await createScenario(objectSpec(BBQScenario.className, {})).getInstances(fixture.context);
    expect(all.filter((i) => i.split === 'train')).toHaveLength(100);
    expect(all[0]!.input.text).toBe('Context 376.\nQuestion: Who is 376?');
    expect(all[0]!.references[1]).toEqual({ output: { text: 'B5' }, tags: ['correct', 'negative', 'non-ambiguous', 'B', '', 'B', 'C'] });
    expect(instanceDigest(all)).toBe(ALL_DIGEST);
    const ses = await new BBQScenario('SES').getInstances(fixture.context);
    expect(ses).toHaveLength(100);
    expect(instanceDigest(ses)).toBe(SES_DIGEST);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new BBQScenario('Age').getInstances(context), `${BBQ_BASE_URL}Age.jsonl`);
  });
});
