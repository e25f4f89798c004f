import { NumpyRandomState, type PandasCell, type PandasFrame, pandasInnerMerge, pandasStr, pyStrip, pyTruthy, readPandasCsvFile } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';

export const ENTITY_MATCHING_BASE_URL = 'http://pages.cs.wisc.edu/~anhai/data1/deepmatcher_data/';

/** The deepmatcher benchmark datasets HELM 0.2.1 knows, by name → folder on the deepmatcher site. */
export const ENTITY_MATCHING_DATASETS: Readonly<Record<string, string>> = {
  Beer: 'Structured/Beer',
  iTunes_Amazon: 'Structured/iTunes-Amazon',
  Fodors_Zagats: 'Structured/Fodors-Zagats',
  DBLP_ACM: 'Structured/DBLP-ACM',
  DBLP_GoogleScholar: 'Structured/DBLP-GoogleScholar',
  Amazon_Google: 'Structured/Amazon-Google',
  Walmart_Amazon: 'Structured/Walmart-Amazon',
  Abt_Buy: 'Textual/Abt-Buy',
  Company: 'Textual/Company',
  Dirty_iTunes_Amazon: 'Dirty/iTunes-Amazon',
  Dirty_DBLP_ACM: 'Dirty/DBLP-ACM',
  Dirty_DBLP_GoogleScholar: 'Dirty/DBLP-GoogleScholar',
  Dirty_Walmart_Amazon: 'Dirty/Walmart-Amazon',
};

/** The zip HELM downloads for a dataset. */
export function entityMatchingUrl(dataset: string): string {
  return `${ENTITY_MATCHING_BASE_URL}${ENTITY_MATCHING_DATASETS[dataset]}/${dataset.toLowerCase()}_exp_data.zip`;
}

/**
 * HELM's `EntityMatchingScenario`: pre-blocked pairs of rows from tables A and B (deepmatcher), serialised as
 * `Product A is col: value. … Product B is …. Are A and B the same?` → Yes/No. Pairs are joined to the tables as
 * pandas 1.5's `merge` orders them. Train keeps all positives and as many negatives, drawn per label with
 * `DataFrame.sample(n)` — which HELM draws from numpy's *global* state, never seeded there, so HELM's own train split
 * varies between processes; flexhelm draws from `RandomState(trainSampleSeed)` (default 0: a process that just ran
 * `np.random.seed(0)`), making it reproducible.
 */
export class EntityMatchingScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.entity_matching_scenario.EntityMatchingScenario';
  readonly className = EntityMatchingScenario.className;
  readonly name = 'entity_matching';
  readonly description = 'T/F generation task for determining if two structured rows refer to the same entity.';
  readonly tags = ['entity_matching', 'structured_reasoning'];

  constructor(
    readonly dataset: string,
    readonly trainSampleSeed = 0,
  ) {
    if (!Object.hasOwn(ENTITY_MATCHING_DATASETS, dataset)) {
      throw new HelmError('AssertionError', `unknown entity matching dataset ${JSON.stringify(dataset)}; use one of ${Object.keys(ENTITY_MATCHING_DATASETS).join(', ')}.`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: entityMatchingUrl(this.dataset), path: join('data', this.dataset), unpack: 'zip' });
    const tableA = await readPandasCsvFile(join(dataPath, 'tableA.csv'));
    const tableB = await readPandasCsvFile(join(dataPath, 'tableB.csv'));
    const mapA = new Map(tableA.columns.filter((c) => c.name !== 'id').map((c) => [`${c.name}_A`, c.name]));
    const mapB = new Map(tableB.columns.filter((c) => c.name !== 'id').map((c) => [`${c.name}_B`, c.name]));
    const random = new NumpyRandomState(this.trainSampleSeed);
    const instances: Instance[] = [];
    for (const split of [TRAIN_SPLIT, VALID_SPLIT, TEST_SPLIT]) {
      const labels = await readPandasCsvFile(join(dataPath, `${split}.csv`));
      const mergedA = pandasInnerMerge(labels, tableA, 'ltable_id', 'id');
      const merged = pandasInnerMerge(mergedA, tableB, 'rtable_id', 'id', ['_A', '_B']);
      const rows = split === TRAIN_SPLIT ? balancedTrainRows(merged, random, join(dataPath, 'train.csv')) : [...merged.index.keys()];
      context.log?.(`Processing ${split} with ${rows.length} rows`);
      for (const position of rows) {
        const row = merged.row(position);
        const label = row.get('label');
        if (label === undefined) throw new HelmError('KeyError', `'label': ${split}.csv has no "label" column.`);
        const text = `Product A is ${serializeRow(row, mapA)}. Product B is ${serializeRow(row, mapB)}. Are A and B the same?`;
        instances.push(instance({ input: { text }, references: [reference(pyTruthyCell(label) ? 'Yes' : 'No', [CORRECT_TAG])], split }));
      }
    }
    return instances;
  }
}

/** `merged.groupby("label").apply(lambda x: x.sample(num_pos))`: per label in sorted order, `num_pos` rows drawn. */
function balancedTrainRows(merged: PandasFrame, random: NumpyRandomState, source: string): number[] {
  const labels = merged.column('label').values;
  const isLabel = (cell: PandasCell, value: number) => cell !== null && typeof cell !== 'string' && Number(cell) === value;
  const positives = labels.filter((l) => isLabel(l, 1)).length;
  const negatives = labels.filter((l) => isLabel(l, 0)).length;
  if (!(positives < negatives)) {
    throw new HelmError('AssertionError', `${source}: HELM needs fewer positive pairs than negative ones to balance the train split (got ${positives} positive, ${negatives} negative).`);
  }
  const groups = new Map<string, { sortKey: PandasCell; rows: number[] }>();
  labels.forEach((cell, i) => {
    if (cell === null || (typeof cell === 'number' && Number.isNaN(cell))) return; // groupby drops NaN keys
    const key = pandasStr(cell);
    let group = groups.get(key);
    if (!group) {
      group = { sortKey: cell, rows: [] };
      groups.set(key, group);
    }
    group.rows.push(i);
  });
  const ordered = [...groups.values()].sort((a, b) => compareCells(a.sortKey, b.sortKey));
  return ordered.flatMap((group) => {
    if (positives > group.rows.length) {
      throw new HelmError('ValueError', `Cannot take a larger sample than population when 'replace=False': label ${pandasStr(group.sortKey)} has ${group.rows.length} train pairs, fewer than the ${positives} positives.`);
    }
    return random.choice(group.rows.length, positives, false).map((p) => group.rows[p]!);
  });
}

function compareCells(a: PandasCell, b: PandasCell): number {
  if (typeof a === 'string' || typeof b === 'string') return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
  return Number(a) - Number(b);
}

/** Python truthiness of a cell (`if pair["label"]`): pandas reads an empty cell as NaN (null here), which is true. */
function pyTruthyCell(cell: PandasCell): boolean {
  return pyTruthy(cell === null ? NaN : cell);
}

/** HELM's `serialize_row`: `name: value` (stripped) per mapped column, joined by `. `. */
function serializeRow(row: ReadonlyMap<string, PandasCell>, columns: ReadonlyMap<string, string>): string {
  return [...columns]
    .map(([merged, name]) => {
      const cell = row.get(merged);
      if (cell === undefined) throw new HelmError('KeyError', `'${merged}': column "${name}" is in one table only, so the merge never suffixed it.`);
      return pyStrip(`${name}: ${pandasStr(cell)}`);
    })
    .join('. ');
}

export const entityMatchingDefinition = defineScenario(
  EntityMatchingScenario.className,
  { dataset: stringArg(), train_sample_seed: intArg().default(0) },
  (args) => new EntityMatchingScenario(args.dataset, args.train_sample_seed),
);
