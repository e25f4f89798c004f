import { pythonLines, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { HelmError, TEST_SPLIT, instance, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario } from './scenario-definition.js';

export const WIKITEXT_103_URL = 'https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-raw-v1.zip';
const WIKITEXT_TEST_DOCUMENTS = 60;

// Python's `re.match("^ = .+ = $", line)`: `.` is anything but `\n`, and `$` also matches before a final `\n`.
const DOCUMENT_TITLE = /^ = [^\n]+ = \n?$/;
const PARAGRAPH_TITLE = /^ = = [^\n]+ = = \n?$/;
const EMPTY_LINE = ' \n';

/**
 * HELM's `Wikitext103Scenario`: the 60 articles of `wiki.test.raw` as language-modeling instances, split at each
 * ` = Title = ` line framed by empty lines.
 */
export class Wikitext103Scenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.wikitext_103_scenario.Wikitext103Scenario';
  readonly className = Wikitext103Scenario.className;
  readonly name = 'wikitext_103';
  readonly description = 'The WikiText language modeling dataset containing over 103 million words';
  readonly tags = ['language_modeling'];

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: WIKITEXT_103_URL, path: 'data', unpack: 'zip' });
    const testPath = join(dataPath, 'wiki.test.raw');
    context.log?.(`Reading ${testPath}`);
    const documents = wikitextDocuments(pythonLines(await readPythonText(testPath)));
    if (documents.length !== WIKITEXT_TEST_DOCUMENTS) {
      throw new HelmError('AssertionError', `${testPath} splits into ${documents.length} articles, not the ${WIKITEXT_TEST_DOCUMENTS} of WikiText-103's test set.`);
    }
    return documents.map((text) => instance({ input: { text }, references: [], split: TEST_SPLIT }));
  }
}

/** Splits WikiText lines into articles: a new one starts at an empty line, a document title and an empty line. */
export function wikitextDocuments(lines: readonly string[]): string[] {
  const documents: string[] = [];
  let buffer: string[] = [];
  let i = 0;
  while (i < lines.length) {
    if (
      i <= lines.length - 3 &&
      lines[i] === EMPTY_LINE &&
      lines[i + 2] === EMPTY_LINE &&
      DOCUMENT_TITLE.test(lines[i + 1]!) &&
      !PARAGRAPH_TITLE.test(lines[i + 1]!)
    ) {
      if (buffer.length) documents.push(buffer.join(''));
      buffer = lines.slice(i, i + 3);
      i += 3;
    } else {
      buffer.push(lines[i]!);
      i += 1;
    }
  }
  if (buffer.length) documents.push(buffer.join(''));
  return documents;
}

export const wikitext103Definition = defineScenario(Wikitext103Scenario.className, {}, () => new Wikitext103Scenario());
