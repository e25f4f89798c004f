import { zipArchive } from '@flexhelm/downloads/testing';
import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { EntityMatchingScenario, entityMatchingUrl } from './entity-matching-scenario.js';
import { createScenario } from './scenario-registry.js';
import { instanceDigest } from './test-instance-digest.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

/** A deepmatcher exp_data zip's files: tables A and B (a gap in manufacturer, numeric prices) and labelled pairs. */
function entityMatchingFiles(): Record<string, string> {
  const table = (side: string, n: number) =>
    `${['id,title,manufacturer,price', ...Array.from({ length: n }, (_, i) => `${i},"${side} item ${i}, v${i % 3}",${i % 4 === 1 ? '' : `maker${i % 3}`},${i % 5 === 0 ? '' : (i * 7.5).toFixed(i % 2)}`)].join('\n')}\n`;
  const pairs = (n: number, offset: number) =>
    `${['ltable_id,rtable_id,label', ...Array.from({ length: n }, (_, i) => `${(i * 5 + offset) % 9},${(i * 3 + offset) % 11},${i % 3 === 0 ? 1 : 0}`)].join('\n')}\n`;
  return { 'tableA.csv': table('A', 9), 'tableB.csv': table('B', 11), 'train.csv': pairs(17, 1), 'valid.csv': pairs(6, 2), 'test.csv': pairs(7, 4) };
}

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

// Expected from HELM 0.2.1's entity_matching_scenario.py with pandas 1.5.3, after np.random.seed(0).
describe('EntityMatchingScenario', () => {
  it('joins pairs to both tables in pandas merge order and balances train by label', async () => {
    fixture = await sourceFixture({ [entityMatchingUrl('Beer')]: zipArchive(entityMatchingFiles()) });
    const instances = await createScenario(objectSpec(EntityMatchingScenario.className, { dataset: 'Beer' })).getInstances(fixture.context);
    expect(instances.map((i) => `${i.split}:${i.references[0]!.output.text}`).join(',')).toBe(EXPECTED_LABELS);
    expect(JSON.parse(JSON.stringify(instances[0]))).toEqual(EXPECTED_FIRST);
    expect(instanceDigest(instances)).toBe(EXPECTED_DIGEST);
  });

  it('refuses an unknown dataset', () => {
    expect(() => new EntityMatchingScenario('Beers')).toThrow(/unknown entity matching dataset "Beers"/);
    expect(() => new EntityMatchingScenario('toString')).toThrow(/unknown entity matching dataset "toString"/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new EntityMatchingScenario('Abt_Buy').getInstances(context), entityMatchingUrl('Abt_Buy'));
  });
});

const EXPECTED_LABELS =
  'train:No,train:No,train:No,train:No,train:No,train:No,train:Yes,train:Yes,train:Yes,train:Yes,train:Yes,train:Yes,valid:Yes,valid:No,valid:No,valid:Yes,valid:No,valid:No,test:Yes,test:No,test:No,test:Yes,test:No,test:No,test:Yes';
const EXPECTED_FIRST = {"input": {"text": "Product A is title: A item 3, v0. manufacturer: maker0. price: 22.5. Product B is title: B item 7, v1. manufacturer: maker1. price: 52.5. Are A and B the same?"}, "references": [{"output": {"text": "No"}, "tags": ["correct"]}], "split": "train"};
const EXPECTED_DIGEST = '466805ad8c7400506351f628666eabeffcbe56c4d6be9f5921cee26eaf51cb52';
