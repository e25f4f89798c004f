import { parsePythonCsvDicts, pythonLines } from '@flexhelm/python-compat';
import { objectSpec } from '@flexhelm/core';
import { zipArchive } from '@flexhelm/downloads/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { NARRATIVE_QA_URL, NarrativeQAScenario, narrativeQaInput } from './narrative-qa-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const SUMMARIES =
  'document_id,set,kind,story_url,story_file_size,wiki_url,wiki_title,story_word_count,story_start,story_end,summary\n' +
  'd1,train,movie,u,1,w,t,1,s,e," Summary one.\nLine two. "\n' +
  'd2,train,book,u,1,w,t,1,s,e,Summary two\n' +
  'd3,valid,book,u,1,w,t,1,s,e,Summary three\n' +
  'd4,test,book,u,1,w,t,1,s,e,Summary four\n';
const row = (doc: string, set: string, q: string, a: string, b: string) => `${doc},${set},${q},${a},${b},x,y,z\n`;
const QAPS =
  'document_id,set,question,answer1,answer2,question_tokenized,answer1_tokenized,answer2_tokenized\n' +
  [0, 1, 2, 3, 4].map((i) => row('d1', 'train', `Q1-${i} `, `A${i}`, `B${i}`)).join('') +
  row('d2', 'train', 'Who?', 'Ann', 'Bob') +
  '\n' +
  [0, 1, 2].map((i) => row('d3', 'valid', `Q3-${i}?`, `C${i}`, `D${i}`)).join('') +
  [0, 1].map((i) => row('d1', 'train', `Q1-late${i}`, 'E', 'F')).join('') +
  [0, 1, 2, 3].map((i) => row('d4', 'test', `Q4-${i}`, `G${i}`, `H${i}`)).join('');
// HELM 0.2.1 on these files (random.seed(0), one random.choice per document), computed with Python 3.11.
const EXPECTED = [
  ['Summary one.\nLine two.\nQuestion: Q1-late1?', 'E', 'F', 'train'],
  ['Summary two\nQuestion: Who?', 'Ann', 'Bob', 'train'],
  ['Summary three\nQuestion: Q3-1?', 'C1', 'D1', 'valid'],
  ['Summary four\nQuestion: Q4-0?', 'G0', 'H0', 'test'],
];

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('NarrativeQAScenario', () => {
  it('picks one question per document with random.seed(0), per split', async () => {
    fixture = await sourceFixture({
      [NARRATIVE_QA_URL]: zipArchive({ 'narrativeqa-master/qaps.csv': QAPS, 'narrativeqa-master/third_party/wikipedia/summaries.csv': SUMMARIES }),
    });
    const instances = await createScenario(objectSpec(NarrativeQAScenario.className, {})).getInstances(fixture.context);
    expect(
      instances.map((i) => {
        expect(i.references.every((r) => r.tags.includes('correct'))).toBe(true);
        return [i.input.text, i.references[0]!.output.text, i.references[1]!.output.text, i.split];
      }),
    ).toEqual(EXPECTED);
  });

  it('DictReader semantics and question formatting', () => {
    expect(parsePythonCsvDicts(pythonLines('a,b\n1\n\n2,3,4\n'))).toEqual([
      new Map([
        ['a', '1'],
        ['b', undefined],
      ]),
      new Map<string, unknown>([
        ['a', '2'],
        ['b', '3'],
        ['__rest__', ['4']],
      ]),
    ]);
    expect(narrativeQaInput('S', 'Why').text).toBe('S\nQuestion: Why?');
    expect(() => narrativeQaInput('S', '')).toThrow(/IndexError/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new NarrativeQAScenario().getInstances(context), NARRATIVE_QA_URL);
  });
});
