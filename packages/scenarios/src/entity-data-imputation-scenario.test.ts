import { tarArchive, zipArchive } from '@flexhelm/downloads/testing';
import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { ENTITY_DATA_IMPUTATION_DATASETS, EntityDataImputationScenario } from './entity-data-imputation-scenario.js';
import { createScenario } from './scenario-registry.js';
import { instanceDigest } from './test-instance-digest.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

/** Buy.csv as in Abt-Buy.zip: 27 products, two without a description (dropped), gaps in manufacturer and price. */
function buyCsv(): string {
  const lines = ['id,name,description,manufacturer,price'];
  for (let i = 0; i < 27; i++) {
    const description = i % 9 === 4 ? '' : `"Item ${i}, ${i % 2 ? 'black' : 'silver'}  "`;
    const manufacturer = i % 5 === 3 ? '' : ['Sony', 'Canon', 'Nikon '][i % 3];
    const price = i % 7 === 2 ? '' : `${(i * 13.25).toFixed(2)}`;
    lines.push(`${1000 + i},Product ${i} ,${description},${manufacturer},${price}`);
  }
  return `${lines.join('\r\n')}\r\n`;
}

/** fz.arff as in restaurant.tar.gz: a header with @attribute lines, quoted data rows, a row with a gap (dropped). */
function restaurantArff(): string {
  const rows = Array.from({ length: 23 }, (_, i) => {
    const city = i === 6 ? '' : `"${['new york', 'los angeles', 'atlanta'][i % 3]} "`;
    return `"place ${i}","${i} main st.",${city},"310/246-${1000 + i}","${i % 2 ? 'american' : 'french'}",${i % 4}`;
  });
  return ['% restaurants', '@relation fz', '', '@attribute name string', '@attribute addr string', '@attribute city string', '@attribute phone string', '@attribute type string', '@attribute class {0,1,2,3}', '@data', ...rows, ''].join('\n');
}

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const files = () => ({
  [ENTITY_DATA_IMPUTATION_DATASETS.Buy!.url]: zipArchive({ 'Abt.csv': 'id,name\n1,x\n', 'Buy.csv': buyCsv(), 'abt_buy_perfectMapping.csv': 'idAbt,idBuy\n' }),
  [ENTITY_DATA_IMPUTATION_DATASETS.Restaurant!.url]: tarArchive({ 'fz.arff': restaurantArff(), 'fz.names': 'x\n' }, { gzip: true }),
});

// Expected values from HELM 0.2.1's entity_data_imputation_scenario.py with pandas 1.5.3 / numpy on the same files.
describe('EntityDataImputationScenario', () => {
  it('serialises Buy rows and splits them as pandas sample(random_state=1234)', async () => {
    fixture = await sourceFixture(files());
    const instances = await createScenario(objectSpec(EntityDataImputationScenario.className, { dataset: 'Buy' })).getInstances(fixture.context);
    expect(instances.map((i) => i.split).join(',')).toBe(EXPECTED_BUY_SPLITS);
    expect(JSON.parse(JSON.stringify(instances[0]))).toEqual(EXPECTED_BUY_FIRST);
    expect(instanceDigest(instances)).toBe(EXPECTED_BUY_DIGEST);
  });

  it('parses the Restaurant arff and honours another seed', async () => {
    fixture = await sourceFixture(files());
    const instances = await new EntityDataImputationScenario('Restaurant').getInstances(fixture.context);
    expect(JSON.parse(JSON.stringify(instances.at(-1)))).toEqual(EXPECTED_RESTAURANT_LAST);
    expect(instanceDigest(instances)).toBe(EXPECTED_RESTAURANT_DIGEST);
    expect(instanceDigest(await new EntityDataImputationScenario('Restaurant', 7).getInstances(fixture.context))).toBe(EXPECTED_RESTAURANT_SEED7_DIGEST);
  });

  it('refuses an unknown dataset', () => {
    expect(() => new EntityDataImputationScenario('Abt')).toThrow(/unknown entity data imputation dataset "Abt"/);
    expect(() => new EntityDataImputationScenario('constructor')).toThrow(/unknown entity data imputation dataset "constructor"/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new EntityDataImputationScenario('Buy').getInstances(context), ENTITY_DATA_IMPUTATION_DATASETS.Buy!.url);
  });
});

const EXPECTED_BUY_SPLITS = 'train,train,train,train,train,train,train,train,train,train,train,train,train,train,train,train,train,train,valid,valid,valid,valid,test,test';
const EXPECTED_BUY_FIRST = {"input": {"text": "name: Product 0. description: Item 0, silver. price: 0.0. manufacturer?"}, "references": [{"output": {"text": "Sony"}, "tags": ["correct"]}], "split": "train"};
const EXPECTED_BUY_DIGEST = 'a73ccf70b623b000f4b3655d2a8e4db774caf5858bba546619ef84298e6741bb';
const EXPECTED_RESTAURANT_LAST = {"input": {"text": "name: place 14. addr: 14 main st.. phone: 310/246-1014. type: french. city?"}, "references": [{"output": {"text": "atlanta"}, "tags": ["correct"]}], "split": "test"};
const EXPECTED_RESTAURANT_DIGEST = '352cdff16aaf7fc408f05a86e8f110a80ff8a72d8dbb4eeece6148dd8e4ecc87';
const EXPECTED_RESTAURANT_SEED7_DIGEST = '686ed7a911ee66ad94db509b2b3bd488bcceb950252e80432648faa8ae206938';
