import { formatPythonCsvRow, parsePythonCsv, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { createReadStream, existsSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { commitTempFileAsync, tempPathFor } from '@flexhelm/atomic-write';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { HelmError, TEST_SPLIT, instance, type Instance } from '@flexhelm/core';
import { joinInside, realPathInside } from './join-inside.js';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonFile } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const THE_PILE_URL = 'https://mystic.the-eye.eu/public/AI/pile/test.jsonl.zst';
export const THE_PILE_INDICES_URL = 'https://raw.githubusercontent.com/EleutherAI/lm_perplexity/main/assets/test_subsample_indices/';

/** The Pile's subsets and the short names EleutherAI's subsample indices use. */
export const PILE_SUBSETS: Readonly<Record<string, string>> = {
  Github: 'github',
  ArXiv: 'arxiv',
  'Wikipedia (en)': 'wikipedia',
  OpenSubtitles: 'opensubtitles',
  OpenWebText2: 'openwebtext2',
  'Gutenberg (PG-19)': 'gutenberg',
  'DM Mathematics': 'dm-mathematics',
  'Enron Emails': 'enron',
  Books3: 'bibliotik',
  'PubMed Abstracts': 'pubmed-abstracts',
  YoutubeSubtitles: 'youtubesubtitles',
  HackerNews: 'hackernews',
  'Pile-CC': 'commoncrawl',
  EuroParl: 'europarl',
  'USPTO Backgrounds': 'uspto',
  FreeLaw: 'freelaw',
  'NIH ExPorter': 'nih-exporter',
  StackExchange: 'stackexchange',
  'PubMed Central': 'pubmed-central',
  'Ubuntu IRC': 'ubuntu-irc',
  BookCorpus2: 'bookcorpus',
  PhilPapers: 'philpapers',
};
const WITHOUT_INDICES = new Set(['ubuntu-irc', 'bookcorpus', 'philpapers']);

/**
 * HELM's `ThePileScenario`: documents of one subset of The Pile's test set as language-modeling instances, kept at
 * EleutherAI's subsample indices (sorted, unique) where they exist. Like HELM it first splits the test set into one
 * `{subset}.csv` per subset (written with Python's csv dialect, read back in text mode, so `\r` become `\n`).
 */
export class ThePileScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.the_pile_scenario.ThePileScenario';
  readonly className = ThePileScenario.className;
  readonly name = 'the_pile';
  readonly description = 'The Pile';
  readonly tags = ['language_modeling'];

  constructor(readonly subset: string) {
    if (!Object.hasOwn(PILE_SUBSETS, subset)) throw new HelmError('AssertionError', `Unknown Pile subset "${subset}"; use one of ${Object.keys(PILE_SUBSETS).join(', ')}.`);
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: THE_PILE_URL, path: 'data', unpack: 'zst' });
    const root = join(dataPath, '..');
    const subsetPath = joinInside(root, `${this.subset}.csv`);
    if (!existsSync(subsetPath)) await cacheAllSubsets(dataPath, root, context);
    await realPathInside(root, subsetPath);
    context.log?.(`Reading ${subsetPath}`);
    const instances = parsePythonCsv(pythonLines(await readPythonText(subsetPath)), ',', Infinity).map((row, i) => {
      if (row.length === 0) throw new HelmError('Exception', `IndexError: row ${i + 1} of ${subsetPath} is empty; delete it to rebuild it.`);
      return instance({ input: { text: row[0]! }, references: [], split: TEST_SPLIT });
    });
    const shortName = PILE_SUBSETS[this.subset]!; // checked in the constructor
    if (WITHOUT_INDICES.has(shortName)) return instances;
    // HELM fetches these with `requests` every run; here they are downloaded once like any other source.
    const indicesPath = await downloadSource(context, this.name, {
      url: `${THE_PILE_INDICES_URL}${shortName}/group0.json`,
      path: join('test_subsample_indices', shortName, 'group0.json'),
    });
    const indices = await readJsonFile(indicesPath);
    if (!Array.isArray(indices) || !indices.every((i) => Number.isInteger(i))) throw new HelmError('TypeError', `${indicesPath} should be a list of ints.`);
    return [...new Set(indices as number[])]
      .sort((a, b) => a - b)
      .map((i) => {
        const picked = instances[i < 0 ? instances.length + i : i];
        if (!picked) throw new HelmError('Exception', `IndexError: index ${i} of ${indicesPath} is outside the ${instances.length} ${this.subset} documents.`);
        return picked;
      });
  }
}

/** HELM's `load_and_cache_all_subsets`, streamed: every subset's documents to `{subset}.csv`, each file written atomically. */
async function cacheAllSubsets(dataPath: string, root: string, context: ScenarioContext): Promise<void> {
  context.log?.(`Loading all data from ${dataPath}`);
  const files = new Map<string, { temp: string; handle: Awaited<ReturnType<typeof open>> }>();
  try {
    for (const subset of Object.keys(PILE_SUBSETS)) {
      const temp = tempPathFor(join(root, `${subset}.csv`));
      files.set(subset, { temp, handle: await open(temp, 'w') });
    }
    let lineNumber = 0;
    const lines = createInterface({ input: createReadStream(dataPath, { encoding: 'utf8' }), crlfDelay: Infinity });
    for await (const line of lines) {
      lineNumber++;
      const where = `line ${lineNumber} of ${dataPath}`;
      let doc: unknown;
      try {
        doc = JSON.parse(line);
      } catch (error) {
        throw new HelmError('ValueError', `${where} is not JSON (${(error as Error).message}); delete the file to download it again.`);
      }
      const subset = jsonString(jsonField(doc, 'meta', where), 'pile_set_name', where);
      const file = files.get(subset);
      if (!file) throw new HelmError('KeyError', `'${subset}': ${where} belongs to no known Pile subset.`);
      // writeFile (not write) writes all of it: one write(2) may take only part on a filling disk.
      await file.handle.writeFile(formatPythonCsvRow([jsonString(doc, 'text', where)]));
    }
    for (const [subset, file] of files) {
      await file.handle.close();
      await commitTempFileAsync(file.temp, join(root, `${subset}.csv`));
    }
  } finally {
    for (const file of files.values()) {
      await file.handle.close().catch(() => undefined);
      await rm(file.temp, { force: true });
    }
  }
}

export const thePileDefinition = defineScenario(ThePileScenario.className, { subset: stringArg() }, (args) => new ThePileScenario(args.subset));
