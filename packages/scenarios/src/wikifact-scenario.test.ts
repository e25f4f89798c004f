import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';
import { WIKIFACT_BUNDLE_URL, WIKIFACT_PROPERTIES, WIKIFactScenario, flattenList } from './wikifact-scenario.js';

const line = (property: string, template: string, resultNames: unknown) => `${JSON.stringify({ property, template, result_names: resultNames, subject: 'Q1' })}\n`;

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('WIKIFactScenario', () => {
  it('keeps the lines of the subject property from train/dev/test, flattening and stripping answers', async () => {
    fixture = await sourceFixture({
      [`${WIKIFACT_BUNDLE_URL}train.jsonl`]:
        line('P31', 'Doug Eckerty is an instance of', [['human', ' person ']]) + line('P36', 'The capital of France is', ['Paris']),
      [`${WIKIFACT_BUNDLE_URL}dev.jsonl`]: line('P31', 'Chegerd, Khash is an instance of', [['village'], ['human settlement\u3000', ['deep']]]),
      [`${WIKIFACT_BUNDLE_URL}test.jsonl`]: line('P36', 'The capital of Peru is', ['Lima']),
    });
    const scenario = createScenario(objectSpec(WIKIFactScenario.className, { subject: 'instance_of' }));
    const instances = await scenario.getInstances(fixture.context);
    // Python: [a.strip() for a in flatten_list(result_names)] for the P31 lines, in file order.
    expect(JSON.parse(JSON.stringify(instances))).toEqual([
      {
        input: { text: 'Doug Eckerty is an instance of' },
        references: [
          { output: { text: 'human' }, tags: ['correct'] },
          { output: { text: 'person' }, tags: ['correct'] },
        ],
        split: 'train',
      },
      {
        input: { text: 'Chegerd, Khash is an instance of' },
        references: [
          { output: { text: 'village' }, tags: ['correct'] },
          { output: { text: 'human settlement' }, tags: ['correct'] },
          { output: { text: 'deep' }, tags: ['correct'] },
        ],
        split: 'valid',
      },
    ]);
    const capitals = await new WIKIFactScenario('capital').getInstances(fixture.context);
    expect(capitals.map((i) => [i.input.text, i.split])).toEqual([
      ['The capital of France is', 'train'],
      ['The capital of Peru is', 'test'],
    ]);
    expect(fixture.server.requests).toHaveLength(3); // the second scenario reused the files
  });

  it('knows HELM\'s 86 subjects and rejects others with AssertionError', () => {
    expect(Object.keys(WIKIFACT_PROPERTIES)).toHaveLength(86);
    expect(WIKIFACT_PROPERTIES.plaintiff).toBe('P1620');
    expect(() => new WIKIFactScenario('toString')).toThrow(/Invalid subject: toString/);
  });

  it('flattens like HELM\'s flatten_list', () => {
    expect(flattenList([['a', ['b']], 'c', []])).toEqual(['a', 'b', 'c']);
    expect(flattenList('x')).toEqual(['x']);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new WIKIFactScenario('genre').getInstances(context), `${WIKIFACT_BUNDLE_URL}train.jsonl`);
  });
});
