import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { GSM8KScenario, GSM_BASE_URL, gsmAnswer } from './gsm-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('GSM8KScenario', () => {
  it('reads train and test, rewriting the final answer marker', async () => {
    const line = (question: string, answer: string) => `${JSON.stringify({ question, answer })}\n`;
    fixture = await sourceFixture({
      [`${GSM_BASE_URL}/train.jsonl`]: line('Tom has 3 apples and buys 2. How many?', 'He has 3 + 2 = <<3+2=5>>5 apples.\n#### 5'),
      [`${GSM_BASE_URL}/test.jsonl`]: line('What is 6 * 7?', '6 * 7 = 42\n#### 42'),
    });
    const instances = await createScenario(objectSpec(GSM8KScenario.className, {})).getInstances(fixture.context);
    expect(JSON.parse(JSON.stringify(instances))).toEqual([
      {
        input: { text: 'Tom has 3 apples and buys 2. How many?' },
        references: [{ output: { text: 'He has 3 + 2 = <<3+2=5>>5 apples. The answer is 5.' }, tags: ['correct'] }],
        split: 'train',
      },
      { input: { text: 'What is 6 * 7?' }, references: [{ output: { text: '6 * 7 = 42 The answer is 42.' }, tags: ['correct'] }], split: 'test' },
    ]);
    expect(fixture.server.requests.map((r) => r.path)).toContain('/raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data//train.jsonl');
  });

  it('gsmAnswer and offline mode', async () => {
    expect(gsmAnswer('a\nb #### 3')).toBe('a b The answer is 3.');
    await expectOfflineError((context) => new GSM8KScenario().getInstances(context), `${GSM_BASE_URL}/train.jsonl`);
  });
});
