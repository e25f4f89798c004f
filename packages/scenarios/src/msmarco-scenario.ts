import { join } from 'node:path';
import { CORRECT_TAG, HelmError, PythonRandom, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance, type Reference } from '@flexhelm/core';
import { downloadSource, type SourceFile } from './download-source.js';
import { parsePythonCsv } from './python-csv.js';
import { pyInt } from './python-int.js';
import { pythonLines, readPythonText } from './python-text.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';

const CODALAB = (bundle: string) => `https://worksheets.codalab.org/rest/bundles/${bundle}/contents/blob/`;
const MSMARCO = (file: string) => `https://msmarco.blob.core.windows.net/msmarcoranking/${file}`;

export const MSMARCO_TRACKS = ['regular', 'trec'] as const;
export type MSMARCOTrack = (typeof MSMARCO_TRACKS)[number];

/** HELM's `DATA_URIS`, keyed by the local file stem (`'_'.join(data_key)`). */
export const MSMARCO_URLS: Readonly<Record<string, string>> = {
  documents: CODALAB('0x50d32fc56ad04dd89510bf86f9c1c9d3'),
  train_queries: MSMARCO('queries.train.tsv'),
  train_qrels: MSMARCO('qrels.train.tsv'),
  train_topk: CODALAB('0x8c43d4ec02ea48d6a727683a9676b77b'),
  regular_queries: CODALAB('0xf5ccf54707b548f9a4c43502c6f15719'),
  regular_qrels: MSMARCO('qrels.dev.small.tsv'),
  regular_topk: CODALAB('0xbc3dfacb2b7746809e582ee01fa5fe70'),
  trec_queries: MSMARCO('msmarco-test2019-queries.tsv.gz'),
  trec_qrels: 'https://trec.nist.gov/data/deep/2019qrels-pass.txt',
  trec_topk: CODALAB('0x2e80572f93b748d594b817249013bdac'),
};

const NUM_TRAIN_QUERIES = 1000;
const MIN_TOPK = 11;
const MAX_TRAIN_TOPK = 20;
const MAX_VALID_TOPK = 1000;
const SHUFFLE_SEED = 1885;
/** Relevance values that make a document the gold match: the TREC track grades 0–3 and counts 2 and 3. */
const GOLD_RELATIONS: Readonly<Record<string, readonly number[]>> = { train: [1], regular: [1], trec: [2, 3] };

type Qrels = Map<number, Map<number, number>>;

interface SplitData {
  qids: number[];
  queries: Map<number, string>;
  qrels: Qrels;
  topk: Qrels;
  /** The top-k bound for this split (`None` for validation without `valid_topk`). */
  k: number | undefined;
  gold: ReadonlySet<number>;
}

/**
 * HELM's `MSMARCOScenario`: passage ranking framed as "does this passage answer the query?". Train instances pair a
 * query's best judged passage with its highest BM25-ranked non-gold passage (ranks 11–20); validation instances hold
 * every judged passage plus, with `validTopk`, the top-k BM25 passages. Passage and query ids are shuffled once with
 * `random.Random(1885)`, which fixes the reference order and the choice of train queries.
 */
export class MSMARCOScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.msmarco_scenario.MSMARCOScenario';
  readonly className = MSMARCOScenario.className;
  readonly name = 'msmarco';
  readonly description = 'Microsoft Machine Reading Comprehension';
  readonly tags = ['information_retrieval'];

  constructor(
    readonly track: string,
    readonly validTopk?: number,
  ) {
    if (!(MSMARCO_TRACKS as readonly string[]).includes(track)) {
      throw new HelmError('AssertionError', `unknown MS MARCO track ${JSON.stringify(track)}; use one of ${MSMARCO_TRACKS.join(', ')}.`);
    }
    if (validTopk !== undefined && !(validTopk && MIN_TOPK <= validTopk && validTopk <= MAX_VALID_TOPK)) {
      throw new HelmError('AssertionError', `valid_topk must be between ${MIN_TOPK} and ${MAX_VALID_TOPK} (got ${validTopk}).`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const read = (key: string) => this.readTable(context, key);
    const documents = idItemMap(await read('documents'), 'documents.tsv');
    const train: SplitData = {
      queries: idItemMap(await read('train_queries'), 'train_queries.tsv'),
      qrels: qrelsMap(await read('train_qrels'), 'train_qrels.tsv'),
      topk: topkMap(await read('train_topk'), 'train_topk.tsv'),
      qids: [],
      k: MAX_TRAIN_TOPK,
      gold: new Set(GOLD_RELATIONS.train),
    };
    train.qids = [...train.queries.keys()];
    const valid: SplitData = {
      queries: idItemMap(await read(`${this.track}_queries`), `${this.track}_queries.tsv`),
      qrels: qrelsMap(await read(`${this.track}_qrels`), `${this.track}_qrels.tsv`),
      topk: topkMap(await read(`${this.track}_topk`), `${this.track}_topk.tsv`),
      qids: [],
      k: this.validTopk,
      gold: new Set(GOLD_RELATIONS[this.track]),
    };
    valid.qids = [...valid.queries.keys()];

    // The only randomness, in HELM's order: documents, then train queries, then validation queries.
    const random = new PythonRandom(SHUFFLE_SEED);
    const docids = [...documents.keys()];
    random.shuffle(docids);
    const docIndex = new Map(docids.map((docid, i) => [docid, i]));
    random.shuffle(train.qids);
    random.shuffle(valid.qids);

    const builder = new InstanceBuilder(documents, docIndex);
    const trainInstances = filterQids(train, true)
      .slice(0, NUM_TRAIN_QUERIES)
      .map((qid) => builder.trainInstance(qid, train));
    const validInstances = filterQids(valid, this.validTopk !== undefined).map((qid) => builder.validInstance(qid, valid));
    return [...trainInstances, ...validInstances];
  }

  /** Downloads one table and parses it as HELM does: tab-separated `csv.reader` rows (TREC qrels use spaces). */
  private async readTable(context: ScenarioContext, key: string): Promise<{ rows: string[][]; path: string }> {
    const url = MSMARCO_URLS[key];
    const source: SourceFile = { url, path: join('data', `${key}.tsv`) };
    if (url.endsWith('.gz')) source.unpack = 'gz';
    const path = await downloadSource(context, this.name, source);
    let text = await readPythonText(path);
    // HELM rewrites the file with every space replaced by a tab; doing it in memory gives the same rows.
    if (key === 'trec_qrels') text = text.replaceAll(' ', '\t');
    return { rows: parsePythonCsv(pythonLines(text), '\t'), path };
  }
}

function intField(text: string, where: string): number {
  const value = pyInt(text);
  if (value === undefined) throw new HelmError('ValueError', `invalid literal for int() with base 10: '${text}' (${where}).`);
  return value;
}

function checkWidth(row: string[], width: number, layout: string, where: string): void {
  if (row.length !== width) {
    throw new HelmError('ValueError', `${where} has ${row.length} tab-separated field(s), expected ${width} (${layout}); the file may be damaged: delete it and run again.`);
  }
}

/** `create_id_item_dict`: `<id>\t<text>` rows → id → text (a repeated id keeps its first position, last text). */
function idItemMap({ rows, path }: { rows: string[][]; path: string }, name: string): Map<number, string> {
  const map = new Map<number, string>();
  rows.forEach((row, i) => {
    const where = `row ${i + 1} of ${name} (${path})`;
    checkWidth(row, 2, '<id> <text>', where);
    map.set(intField(row[0], where), row[1]);
  });
  return map;
}

function nestedMap(rows: string[][], path: string, name: string, width: number, layout: string, pick: (row: string[]) => [string, string, string]): Qrels {
  const map: Qrels = new Map();
  rows.forEach((row, i) => {
    const where = `row ${i + 1} of ${name} (${path})`;
    checkWidth(row, width, layout, where);
    const [qid, docid, value] = pick(row).map((field) => intField(field, where));
    let inner = map.get(qid);
    if (!inner) map.set(qid, (inner = new Map()));
    inner.set(docid, value);
  });
  return map;
}

/** `create_qrels_dict`: `<qid> 0 <docid> <rel>` rows → qid → docid → relevance. */
function qrelsMap({ rows, path }: { rows: string[][]; path: string }, name: string): Qrels {
  return nestedMap(rows, path, name, 4, '<qid> 0 <docid> <rel>', (row) => [row[0], row[2], row[3]]);
}

/** `create_topk_dict`: `<qid> <docid> <rank>` rows → qid → docid → rank. */
function topkMap({ rows, path }: { rows: string[][]; path: string }, name: string): Qrels {
  return nestedMap(rows, path, name, 3, '<qid> <docid> <rank>', (row) => [row[0], row[1], row[2]]);
}

/** `filter_qids`: queries with a gold judgment and, when `checkTopk`, at least k ranked documents. */
function filterQids(split: SplitData, checkTopk: boolean): number[] {
  return split.qids.filter((qid) => {
    const judged = split.qrels.get(qid);
    if (!judged || ![...judged.values()].some((rel) => split.gold.has(rel))) return false;
    if (!checkTopk) return true;
    const ranked = split.topk.get(qid);
    return ranked !== undefined && ranked.size >= split.k!;
  });
}

class InstanceBuilder {
  constructor(
    private readonly documents: ReadonlyMap<number, string>,
    private readonly docIndex: ReadonlyMap<number, number>,
  ) {}

  trainInstance(qid: number, split: SplitData): Instance {
    const judged = split.qrels.get(qid)!;
    // A stable sort by descending relevance, as Python's sorted(..., reverse=True).
    const [correct] = [...judged.keys()].sort((a, b) => judged.get(b)! - judged.get(a)!);
    const ranked = split.topk.get(qid)!;
    const wrong = [...ranked.entries()]
      .filter(([, rank]) => MIN_TOPK <= rank && rank <= split.k!)
      .map(([docid]) => docid)
      .find((docid) => !judged.has(docid) || !split.gold.has(judged.get(docid)!));
    if (wrong === undefined) {
      throw new HelmError('IndexError', `list index out of range: train query ${qid} has no non-gold document ranked ${MIN_TOPK}–${split.k} in train_topk.tsv.`);
    }
    return this.instance(qid, TRAIN_SPLIT, this.inShuffledOrder([correct, wrong]), split);
  }

  validInstance(qid: number, split: SplitData): Instance {
    const judged = [...split.qrels.get(qid)!.keys()];
    let ranked: number[] = [];
    if (split.k !== undefined) {
      ranked = [...split.topk.get(qid)!.entries()].filter(([, rank]) => rank <= split.k!).map(([docid]) => docid);
    }
    // set() order does not matter: the shuffled-order keys are distinct.
    return this.instance(qid, VALID_SPLIT, this.inShuffledOrder([...new Set([...judged, ...ranked])]), split);
  }

  private inShuffledOrder(docids: number[]): number[] {
    const index = (docid: number): number => {
      const i = this.docIndex.get(docid);
      // Python would fail comparing None keys (or on the document lookup right after).
      if (i === undefined) throw new HelmError('KeyError', `${docid}: document ${docid} is judged or ranked but missing from documents.tsv.`);
      return i;
    };
    if (docids.length === 1) return docids;
    return [...docids].sort((a, b) => index(a) - index(b));
  }

  private instance(qid: number, split: string, docids: number[], data: SplitData): Instance {
    const judged = data.qrels.get(qid)!;
    const ranked = data.topk.get(qid);
    if (!ranked) throw new HelmError('KeyError', `${qid}: query ${qid} has judgments but no top-k list (HELM needs one for every query).`);
    const references: Reference[] = docids.map((docid) => {
      const rel = judged.get(docid);
      const rank = ranked.get(docid);
      const tags = [`docid=${docid}`];
      if (rel !== undefined && data.gold.has(rel)) tags.push(CORRECT_TAG);
      if (rel) tags.push(`relevance=${rel}`);
      if (rank) tags.push(`rank=${rank}`);
      const text = this.documents.get(docid);
      if (text === undefined) throw new HelmError('KeyError', `${docid}: document ${docid} is missing from documents.tsv.`);
      return reference(text, tags);
    });
    return instance({ input: { text: data.queries.get(qid)! }, references, split });
  }
}

export const msmarcoDefinition = defineScenario(
  MSMARCOScenario.className,
  { track: stringArg(), valid_topk: intArg().nullable().optional() },
  (args) => new MSMARCOScenario(args.track, args.valid_topk ?? undefined),
);
