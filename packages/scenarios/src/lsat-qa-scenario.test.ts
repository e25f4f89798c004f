import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { LSAT_BASE_URL, LSATScenario, lsatQuestionTypes } from './lsat-qa-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const question = (q: string, type: string, answer: string) => ({ question: q, tags: ['x', 'y', type], options: ['o1', 'o2', 'o3', 'o4', 'o5'], answer });
const file = (passage: string, questions: object[]) => JSON.stringify([{ id: 'p', passage, questions }]);

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('LSATScenario', () => {
  it('reads Training/Development/Test and filters by question type', async () => {
    fixture = await sourceFixture({
      [`${LSAT_BASE_URL}AR_TrainingData.json`]: file('Seven people sit.', [question('Who sits first?', 'simple ordering', 'B'), question('Which group?', 'grouping (distribution)', 'E')]),
      [`${LSAT_BASE_URL}AR_DevelopmentData.json`]: file('Dev passage.', [question('Odd one?', '', 'A')]),
      [`${LSAT_BASE_URL}AR_TestData.json`]: file('Test passage.', [question('Assign?', 'determined assignment', 'C')]),
    });
    const all = await createScenario(objectSpec(LSATScenario.className, { task: 'all' })).getInstances(fixture.context);
    expect(all.map((i) => [i.input.text, i.references.findIndex((r) => r.tags.includes('correct')), i.references.length, i.split])).toEqual([
      ['Seven people sit.\nQuestion: Who sits first?', 1, 5, 'train'],
      ['Seven people sit.\nQuestion: Which group?', 4, 5, 'train'],
      ['Dev passage.\nQuestion: Odd one?', 0, 5, 'valid'],
      ['Test passage.\nQuestion: Assign?', 2, 5, 'test'],
    ]);
    const grouping = await new LSATScenario('grouping').getInstances(fixture.context);
    expect(grouping.map((i) => i.input.text)).toEqual(['Seven people sit.\nQuestion: Which group?']);
    const misc = await new LSATScenario('miscellaneous').getInstances(fixture.context);
    expect(misc.map((i) => i.input.text)).toEqual(['Dev passage.\nQuestion: Odd one?']);
  });

  it('question types and task validation follow HELM', async () => {
    expect(lsatQuestionTypes('in/out grouping')).toEqual(['in_out_grouping', 'grouping']);
    expect(lsatQuestionTypes('')).toEqual(['miscellaneous', undefined]);
    expect(() => new LSATScenario('in_out_grouping')).toThrow(/Invalid task: in_out_grouping/);
    await expectOfflineError((context) => new LSATScenario('all').getInstances(context), `${LSAT_BASE_URL}AR_TrainingData.json`);
  });
});
