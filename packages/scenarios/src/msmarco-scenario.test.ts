import { gzipSync } from 'node:zlib';
import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { MSMARCOScenario, MSMARCO_URLS } from './msmarco-scenario.js';
import { createScenario } from './scenario-registry.js';
import { instanceDigest } from './test-instance-digest.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const rows = (table: (string | number)[][], separator = '\t') => table.map((r) => `${r.join(separator)}\n`).join('');

/**
 * Small files in MS MARCO's real layouts: 40 passages (one with quotes, which Python's csv keeps), train queries with
 * 20 BM25 ranks each (one with only 19, one without judgments), regular and TREC validation queries with graded
 * relevance (TREC qrels space-separated, TREC queries gzipped), judged passages outside the top-k and repeated ids.
 */
function msmarcoFiles(): Record<string, string | Uint8Array> {
  const docids = Array.from({ length: 40 }, (_, i) => 100 + i);
  const documents = docids.map((d) => [d, d === 105 ? 'it said "hi" there' : `passage number ${d} text`]);
  const train = (q: number, r: number) => 100 + ((q * 7 + r * 3) % 40);
  const trainTopk: number[][] = [];
  for (const q of [1, 2, 3, 4, 6]) for (let r = 1; r <= (q === 4 ? 19 : 20); r++) trainTopk.push([q, train(q, r), r]);
  const trainQrels = [
    [1, 0, 101, 1],
    [2, 0, train(2, 12), 1],
    [3, 0, 130, 1],
    [3, 0, 120, 1],
    [4, 0, 104, 1],
    [6, 0, 106, 1],
  ];
  const valid = (q: number, r: number) => 100 + ((q * 5 + r * 11) % 40);
  const validTopk = (qids: number[]) => qids.flatMap((q) => Array.from({ length: 12 }, (_, i) => [q, valid(q, i + 1), i + 1]));
  const regularQrels = [
    [50, 0, 101, 1],
    [51, 0, 102, 1],
    [51, 0, valid(51, 3), 0],
    [53, 0, 139, 1],
    [54, 0, 110, 0],
  ];
  const trecQrels = [
    [60, 0, 101, 3],
    [60, 0, 102, 1],
    [60, 0, valid(60, 2), 0],
    [61, 0, 103, 2],
    [62, 0, 104, 1],
    [63, 0, 105, 2],
    [63, 0, 106, 3],
  ];
  return {
    [MSMARCO_URLS.documents]: rows(documents),
    [MSMARCO_URLS.train_queries]: rows([1, 2, 3, 4, 5, 6, 2].map((q) => [q, q === 2 ? 'what is two' : `train query ${q}`])),
    [MSMARCO_URLS.train_qrels]: rows(trainQrels),
    [MSMARCO_URLS.train_topk]: rows(trainTopk),
    [MSMARCO_URLS.regular_queries]: rows([50, 51, 52, 53, 54, 55].map((q) => [q, `regular query ${q}`])),
    [MSMARCO_URLS.regular_qrels]: rows(regularQrels),
    [MSMARCO_URLS.regular_topk]: rows(validTopk([50, 51, 52, 54, 55])),
    [MSMARCO_URLS.trec_queries]: gzipSync(rows([60, 61, 62, 63].map((q) => [q, `trec query ${q}`]))),
    [MSMARCO_URLS.trec_qrels]: rows(trecQrels, ' '),
    [MSMARCO_URLS.trec_topk]: rows(validTopk([60, 61, 62, 63])),
  };
}

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const refs = (i: { references: { tags: string[] }[] }) => i.references.map((r) => r.tags.join(' '));

describe('MSMARCOScenario', () => {
  it('builds train and regular-track instances as HELM 0.2.1 (shuffle order, filters, tags)', async () => {
    fixture = await sourceFixture(msmarcoFiles());
    const instances = await createScenario(objectSpec(MSMARCOScenario.className, { track: 'regular', valid_topk: 11 })).getInstances(fixture.context);
    // Expected values from HELM 0.2.1's msmarco_scenario.py run on the same files under Python 3.11.
    expect(instances.map((i) => `${i.split} ${i.input.text}`)).toEqual(EXPECTED_REGULAR_QUERIES);
    expect(refs(instances[0]!)).toEqual(EXPECTED_REGULAR_FIRST_TAGS);
    expect(instanceDigest(instances)).toBe(EXPECTED_REGULAR_DIGEST);
  });

  it('builds TREC-track instances from graded, space-separated qrels (with and without valid_topk)', async () => {
    fixture = await sourceFixture(msmarcoFiles());
    const qrelsOnly = await new MSMARCOScenario('trec').getInstances(fixture.context);
    expect(qrelsOnly.filter((i) => i.split === 'valid').map(refs)).toEqual(EXPECTED_TREC_QRELS_TAGS);
    expect(instanceDigest(qrelsOnly)).toBe(EXPECTED_TREC_QRELS_DIGEST);
    const topk = await new MSMARCOScenario('trec', 11).getInstances(fixture.context);
    expect(instanceDigest(topk)).toBe(EXPECTED_TREC_TOPK_DIGEST);
  });

  it('refuses bad arguments as HELM does', () => {
    expect(() => createScenario(objectSpec(MSMARCOScenario.className, { track: 'doc' }))).toThrow(/unknown MS MARCO track/);
    expect(() => createScenario(objectSpec(MSMARCOScenario.className, { track: 'trec', valid_topk: 10 }))).toThrow(/between 11 and 1000/);
    expect(() => createScenario(objectSpec(MSMARCOScenario.className, {}))).toThrow(/missing required argument 'track'/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new MSMARCOScenario('regular').getInstances(context), MSMARCO_URLS.documents!);
  });
});

const EXPECTED_REGULAR_QUERIES = [
  'train train query 1',
  'train train query 6',
  'train what is two',
  'train train query 3',
  'valid regular query 51',
  'valid regular query 50',
];
const EXPECTED_REGULAR_FIRST_TAGS = ['docid=101 correct relevance=1', 'docid=100 rank=11'];
const EXPECTED_REGULAR_DIGEST = '8e9cb06fd5fa46573242e60f1da007c760c6b6e74d2370885e43d8c455960d98';
const EXPECTED_TREC_QRELS_TAGS = [
  ['docid=103 correct relevance=2'],
  ['docid=105 correct relevance=2', 'docid=106 correct relevance=3 rank=1'],
  ['docid=102 rank=2', 'docid=101 correct relevance=3'],
];
const EXPECTED_TREC_QRELS_DIGEST = '23f8c1bea9d4ade74c4d2a384eee3b87d05ecfc2edce320f433379072227821a';
const EXPECTED_TREC_TOPK_DIGEST = 'd772a71ab2ea799e844558ce7a9f1490ff2fa117364dada38f5dc820cb1b6852';
