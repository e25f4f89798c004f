import { pyParseInt, PythonCsvParser, PythonRandom, pythonTextLines } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance, type Reference } from '@flexhelm/core';
import { downloadSource, type SourceFile } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';

const CODALAB = (bundle: string) => `https://worksheets.codalab.org/rest/bundles/${bundle}/contents/blob/`;
const MSMARCO = (file: string) => `https://msmarco.blob.core.windows.net/msmarcoranking/${file}`;

export const MSMARCO_TRACKS = ['regular', 'trec'] as const;
export type MSMARCOTrack = (typeof MSMARCO_TRACKS)[number];

/** HELM's `DATA_URIS`, keyed by the local file stem (`'_'.join(data_key)`). */
export const MSMARCO_URLS = {
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
} as const satisfies Record<string, string>;

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
    // Every source is downloaded first (HELM's order), then streamed: the passage file is ~3 GB.
    const paths = new Map<string, string>();
    const keys = ['documents', 'train_queries', 'train_qrels', 'train_topk', `${this.track}_queries`, `${this.track}_qrels`, `${this.track}_topk`];
    // The track is one of MSMARCO_TRACKS (checked in the constructor), so every key names a URL.
    for (const key of keys as (keyof typeof MSMARCO_URLS)[]) {
      paths.set(key, await this.download(context, key));
    }
    const table = (key: string) => ({ key, path: paths.get(key)! });
    const docids = await documentIds(table('documents'));
    const train: SplitData = {
      queries: await idItemMap(table('train_queries')),
      qrels: await qrelsMap(table('train_qrels')),
      topk: await topkMap(table('train_topk')),
      qids: [],
      k: MAX_TRAIN_TOPK,
      gold: new Set(GOLD_RELATIONS.train),
    };
    train.qids = [...train.queries.keys()];
    const valid: SplitData = {
      queries: await idItemMap(table(`${this.track}_queries`)),
      qrels: await qrelsMap(table(`${this.track}_qrels`)),
      topk: await topkMap(table(`${this.track}_topk`)),
      qids: [],
      k: this.validTopk,
      gold: new Set(GOLD_RELATIONS[this.track]),
    };
    valid.qids = [...valid.queries.keys()];

    // The only randomness, in HELM's order: documents, then train queries, then validation queries.
    const random = new PythonRandom(SHUFFLE_SEED);
    random.shuffle(docids);
    random.shuffle(train.qids);
    random.shuffle(valid.qids);

    const trainQids = filterQids(train, true).slice(0, NUM_TRAIN_QUERIES);
    const validQids = filterQids(valid, this.validTopk !== undefined);
    const trainCandidates = trainQids.map((qid) => trainDocids(qid, train));
    const validCandidates = validQids.map((qid) => validDocids(qid, valid));
    // Only the passages the instances use are looked up (and their texts read in a second pass over the file).
    const needed = new Set([...trainCandidates, ...validCandidates].flat());
    const docIndex = new Map<number, number>();
    docids.forEach((docid, i) => {
      if (needed.has(docid)) docIndex.set(docid, i);
    });
    const texts = await documentTexts(table('documents'), needed);
    const builder = new InstanceBuilder(texts, docIndex);
    return [
      ...trainQids.map((qid, i) => builder.instance(qid, TRAIN_SPLIT, trainCandidates[i]!, train)),
      ...validQids.map((qid, i) => builder.instance(qid, VALID_SPLIT, validCandidates[i]!, valid)),
    ];
  }

  private async download(context: ScenarioContext, key: keyof typeof MSMARCO_URLS): Promise<string> {
    const url = MSMARCO_URLS[key];
    const source: SourceFile = { url, path: join('data', `${key}.tsv`) };
    if (url.endsWith('.gz')) source.unpack = 'gz';
    return downloadSource(context, this.name, source);
  }
}

interface Table {
  key: string;
  path: string;
}

/**
 * The rows of one table as HELM parses them: tab-separated `csv.reader` rows, checked to have `width` fields. HELM
 * rewrites the TREC qrels file with every space replaced by a tab; doing it line by line gives the same rows.
 */
async function forEachRow(table: Table, width: number, layout: string, onRow: (row: string[], where: string) => void): Promise<void> {
  const parser = new PythonCsvParser('\t');
  const spaces = table.key === 'trec_qrels';
  let count = 0;
  const handle = (row: string[] | undefined) => {
    if (!row) return;
    const where = `row ${++count} of ${table.key}.tsv (${table.path})`;
    if (row.length !== width) {
      throw new HelmError('ValueError', `${where} has ${row.length} tab-separated field(s), expected ${width} (${layout}); the file may be damaged: delete it and run again.`);
    }
    onRow(row, where);
  };
  for await (const line of pythonTextLines(table.path)) handle(parser.feedLine(spaces ? line.replaceAll(' ', '\t') : line));
  handle(parser.finish());
}

function intField(text: string, where: string): number {
  const value = pyParseInt(text);
  if (value === undefined) throw new HelmError('ValueError', `invalid literal for int() with base 10: '${text}' (${where}).`);
  return value;
}

/** The passage ids in `dict` key order (first appearance), without keeping the ~3 GB of text. */
async function documentIds(table: Table): Promise<number[]> {
  const seen = new Set<number>();
  const ids: number[] = [];
  await forEachRow(table, 2, '<id> <text>', (row, where) => {
    const id = intField(row[0]!, where);
    if (!seen.has(id)) {
      seen.add(id);
      ids.push(id);
    }
  });
  return ids;
}

/** The texts of the wanted passages (a repeated id keeps its last text, as the dict does). */
async function documentTexts(table: Table, wanted: ReadonlySet<number>): Promise<Map<number, string>> {
  const texts = new Map<number, string>();
  await forEachRow(table, 2, '<id> <text>', (row, where) => {
    const id = intField(row[0]!, where);
    if (wanted.has(id)) texts.set(id, row[1]!);
  });
  return texts;
}

/** `create_id_item_dict`: `<id>\t<text>` rows → id → text (a repeated id keeps its first position, last text). */
async function idItemMap(table: Table): Promise<Map<number, string>> {
  const map = new Map<number, string>();
  await forEachRow(table, 2, '<id> <text>', (row, where) => map.set(intField(row[0]!, where), row[1]!));
  return map;
}

async function nestedMap(table: Table, width: number, layout: string, pick: (row: string[]) => [string, string, string]): Promise<Qrels> {
  const map: Qrels = new Map();
  await forEachRow(table, width, layout, (row, where) => {
    const [qid, docid, value] = pick(row).map((field) => intField(field, where)) as [number, number, number];
    let inner = map.get(qid);
    if (!inner) {
      inner = new Map();
      map.set(qid, inner);
    }
    inner.set(docid, value);
  });
  return map;
}

/** `create_qrels_dict`: `<qid> 0 <docid> <rel>` rows → qid → docid → relevance. */
function qrelsMap(table: Table): Promise<Qrels> {
  return nestedMap(table, 4, '<qid> 0 <docid> <rel>', (row) => [row[0]!, row[2]!, row[3]!]);
}

/** `create_topk_dict`: `<qid> <docid> <rank>` rows → qid → docid → rank. */
function topkMap(table: Table): Promise<Qrels> {
  return nestedMap(table, 3, '<qid> <docid> <rank>', (row) => [row[0]!, row[1]!, row[2]!]);
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

/** A train query's passages: its most relevant judged one and its best-ranked (11–20) non-gold one. */
function trainDocids(qid: number, split: SplitData): number[] {
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
  return [correct!, wrong]; // judged is non-empty: the query passed filterQids
}

/** A validation query's passages: every judged one plus, with `valid_topk`, the top-k ranked ones (no repeats). */
function validDocids(qid: number, split: SplitData): number[] {
  const judged = [...split.qrels.get(qid)!.keys()];
  let ranked: number[] = [];
  if (split.k !== undefined) {
    ranked = [...split.topk.get(qid)!.entries()].filter(([, rank]) => rank <= split.k!).map(([docid]) => docid);
  }
  // set() order does not matter: the shuffled-order keys they are sorted by are distinct.
  return [...new Set([...judged, ...ranked])];
}

class InstanceBuilder {
  constructor(
    private readonly texts: ReadonlyMap<number, string>,
    private readonly docIndex: ReadonlyMap<number, number>,
  ) {}

  /** The instance of one query: its passages in shuffled-passage order, tagged with docid, correctness, relevance, rank. */
  instance(qid: number, split: string, candidates: number[], data: SplitData): Instance {
    const docids = this.inShuffledOrder(candidates);
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
      const text = this.texts.get(docid);
      if (text === undefined) throw new HelmError('KeyError', `${docid}: document ${docid} is missing from documents.tsv.`);
      return reference(text, tags);
    });
    return instance({ input: { text: data.queries.get(qid)! }, references, split });
  }

  private inShuffledOrder(docids: number[]): number[] {
    if (docids.length === 1) return docids;
    const index = (docid: number): number => {
      const i = this.docIndex.get(docid);
      // Python fails comparing a None key (or on the document lookup right after).
      if (i === undefined) throw new HelmError('KeyError', `${docid}: document ${docid} is judged or ranked but missing from documents.tsv.`);
      return i;
    };
    return [...docids].sort((a, b) => index(a) - index(b));
  }
}

export const msmarcoDefinition = defineScenario(
  MSMARCOScenario.className,
  { track: stringArg(), valid_topk: intArg().nullable().optional() },
  (args) => new MSMARCOScenario(args.track, args.valid_topk ?? undefined),
);
