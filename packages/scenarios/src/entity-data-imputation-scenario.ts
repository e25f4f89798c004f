import { NumpyRandomState, type PandasColumn, PandasFrame, pandasIsNa, pandasStr, pyRound, pySplit, pyStrip, pythonLines, readPandasCsv, readPandasCsvFile, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';

/** The two datasets HELM 0.2.1 imputes: their source and the column to fill in. */
export const ENTITY_DATA_IMPUTATION_DATASETS: Readonly<Record<string, { url: string; imputeColumn: string }>> = {
  Buy: { url: 'https://dbs.uni-leipzig.de/file/Abt-Buy.zip', imputeColumn: 'manufacturer' },
  Restaurant: { url: 'https://www.cs.utexas.edu/users/ml/riddle/data/restaurant.tar.gz', imputeColumn: 'city' },
};

/**
 * HELM's `EntityDataImputationScenario`: rows of a product (Buy) or restaurant (Restaurant) table serialised as
 * `col: value. …` with one column left out to predict. 10% of rows are test, 20% of the rest valid, the remainder
 * train, drawn as pandas' `DataFrame.sample(frac=…, random_state=seed)` (numpy's legacy `choice` without replacement).
 */
export class EntityDataImputationScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.entity_data_imputation_scenario.EntityDataImputationScenario';
  readonly className = EntityDataImputationScenario.className;
  readonly name = 'entity_data_imputation';
  readonly description = 'Missing cell value generation task from a structured row.';
  readonly tags = ['entity_data_imputation', 'structured_reasoning'];

  constructor(
    readonly dataset: string,
    readonly seed = 1234,
  ) {
    if (!Object.hasOwn(ENTITY_DATA_IMPUTATION_DATASETS, dataset)) {
      throw new HelmError('AssertionError', `unknown entity data imputation dataset ${JSON.stringify(dataset)}; use one of ${Object.keys(ENTITY_DATA_IMPUTATION_DATASETS).join(', ')}.`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const { url, imputeColumn } = ENTITY_DATA_IMPUTATION_DATASETS[this.dataset]!; // checked in the constructor
    const dataPath = await downloadSource(context, this.name, { url, path: join('data', this.dataset), unpack: 'auto' });
    const table = this.dataset === 'Buy' ? await readBuyTable(dataPath) : restaurantTable(await readPythonText(join(dataPath, 'fz.arff')));
    return entityDataImputationInstances(table, imputeColumn, this.seed);
  }
}

/** Buy.csv without its id column and without rows lacking a description. */
async function readBuyTable(dataPath: string): Promise<PandasFrame> {
  const table = await readPandasCsvFile(join(dataPath, 'Buy.csv'));
  table.column('id');
  const description = table.column('description');
  const kept = [...description.values.keys()].filter((i) => !pandasIsNa(description.values[i]!));
  return new PandasFrame(
    table.columns.filter((c) => c.name !== 'id'),
    table.index,
  ).take(kept);
}

/**
 * fz.arff as HELM parses it by hand: `@attribute <name> …` lines name the columns, stripped non-blank lines after
 * `@data` are csv rows; then the `class` column goes, quotes are removed and cells stripped, and rows with a gap drop.
 */
export function restaurantTable(arffText: string): PandasFrame {
  const columns: string[] = [];
  const data: string[] = [];
  let inData = false;
  for (const line of pythonLines(arffText)) {
    if (pyStrip(line).length === 0) continue;
    if (inData) data.push(pyStrip(line));
    if (line.startsWith('@attribute')) {
      const parts = pySplit(line);
      if (parts.length < 3) throw new HelmError('ValueError', `not enough values to unpack (expected 3, got ${parts.length}): fz.arff line "${pyStrip(line)}" should read "@attribute <name> <type>".`);
      columns.push(parts[1]!);
    }
    if (line.startsWith('@data')) inData = true;
  }
  const table = readPandasCsv(data.join('\n'), { names: columns, source: 'the @data section of fz.arff' });
  table.column('class');
  const cleaned: PandasColumn[] = table.columns
    .filter((c) => c.name !== 'class')
    .map((c) => {
      if (c.dtype !== 'object') throw new HelmError('AttributeError', `Can only use .str accessor with string values: fz.arff column "${c.name}" holds only numbers.`);
      return { ...c, values: c.values.map((v) => (typeof v === 'string' ? pyStrip(v.replaceAll('"', '')) : v)) };
    });
  const complete = [...table.index.keys()].filter((i) => cleaned.every((c) => !pandasIsNa(c.values[i]!)));
  return new PandasFrame(cleaned, table.index).take(complete);
}

/** `frame.sample(frac=frac, random_state=seed)`: positions of the sampled rows, in draw order. */
export function pandasSamplePositions(length: number, frac: number, seed: number): number[] {
  return new NumpyRandomState(seed).choice(length, pyRound(frac * length), false);
}

/** The train/valid/test instances of a cleaned table. */
export function entityDataImputationInstances(table: PandasFrame, imputeColumn: string, seed: number): Instance[] {
  table.column(imputeColumn);
  const test = pandasSamplePositions(table.length, 0.1, seed);
  const testSet = new Set(test);
  const remaining = [...table.index.keys()].filter((i) => !testSet.has(i));
  const valid = pandasSamplePositions(remaining.length, 0.2, seed).map((p) => remaining[p]!);
  const validSet = new Set(valid);
  const train = remaining.filter((i) => !validSet.has(i));
  const serialized = table.columns.map((c) => c.name).filter((name) => name !== imputeColumn);
  const instances: Instance[] = [];
  for (const [split, positions] of [
    [TRAIN_SPLIT, train],
    [VALID_SPLIT, valid],
    [TEST_SPLIT, test],
  ] as const) {
    for (const position of positions) {
      const row = table.row(position);
      const text = serialized.map((name) => pyStrip(`${name}: ${pandasStr(row.get(name)!)}`)).join('. ');
      instances.push(instance({ input: { text: `${text}. ${imputeColumn}?` }, references: [reference(pandasStr(row.get(imputeColumn)!), [CORRECT_TAG])], split }));
    }
  }
  return instances;
}

export const entityDataImputationDefinition = defineScenario(
  EntityDataImputationScenario.className,
  { dataset: stringArg(), seed: intArg().default(1234) },
  (args) => new EntityDataImputationScenario(args.dataset, args.seed),
);
