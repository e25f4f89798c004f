import { loadPickle, type PickleValue, pySplit } from '@flexhelm/python-compat';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, intArg, stringArg } from './scenario-definition.js';

/** The pickled datasets HELM reads: url, local file name, and the keys of article and summary in each example. */
export const SUMMARIZATION_DATASETS: Readonly<Record<string, { url: string; file: string; articleKey: string; summaryKey: string }>> = {
  xsum: {
    url: 'https://worksheets.codalab.org/rest/bundles/0xac5607f21bf945939edc56ea945496d5/contents/blob/',
    file: 'xsum.pk',
    articleKey: 'document',
    summaryKey: 'summary',
  },
  'xsum-sampled': {
    url: 'https://worksheets.codalab.org/rest/bundles/0xcfbb0ef1226040f78e58060c9e4d13cf/contents/blob/',
    file: 'xsum-sampled.pk',
    articleKey: 'document',
    summaryKey: 'summary',
  },
  'cnn-dm': {
    url: 'https://worksheets.codalab.org/rest/bundles/0x07630390bbda44879a2ad36e2125d64c/contents/blob/',
    file: 'cnndm.pk',
    articleKey: 'article',
    summaryKey: 'highlights',
  },
};

const SUMMARIZATION_SPLITS: readonly (readonly [string, string])[] = [
  ['train', TRAIN_SPLIT],
  ['validation', VALID_SPLIT],
  ['test', TEST_SPLIT],
];

export interface SummarizationOptions {
  samplingMinLength?: number;
  samplingMaxLength?: number;
  docMaxLength?: number;
}

/**
 * HELM's `SummarizationScenario` (XSum, XSum-sampled, CNN/DailyMail): articles and reference summaries from a pickled
 * `{train, validation, test}` dataset, whitespace-normalised, articles cut to `docMaxLength` words; train articles
 * outside [samplingMinLength, samplingMaxLength] words (and, for `xsum`, HELM's XSum filter) are skipped.
 */
export class SummarizationScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.summarization_scenario.SummarizationScenario';
  readonly className = SummarizationScenario.className;
  readonly name = 'summarization';
  readonly description = 'Scenario for summarization tasks';
  readonly tags = ['summarization'];

  constructor(
    readonly datasetName: string,
    readonly options: SummarizationOptions = {},
  ) {
    if (!Object.hasOwn(SUMMARIZATION_DATASETS, datasetName)) {
      throw new HelmError('Exception', `Uknown dataset_name: ${datasetName}. Use one of: ${Object.keys(SUMMARIZATION_DATASETS).join(', ')}.`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataset = SUMMARIZATION_DATASETS[this.datasetName]!; // checked in the constructor
    const path = await downloadSource(context, this.name, { url: dataset.url, path: join('data', dataset.file) });
    const data = loadPickle(await readFile(path));
    if (!(data instanceof Map)) throw new HelmError('TypeError', `${path} does not hold a dict of splits; delete it to download it again.`);
    const { samplingMinLength, samplingMaxLength, docMaxLength } = this.options;
    const instances: Instance[] = [];
    for (const [splitName, split] of SUMMARIZATION_SPLITS) {
      const examples = data.get(splitName);
      if (!Array.isArray(examples)) throw new HelmError('KeyError', `'${splitName}': ${path} has no list of ${splitName} examples.`);
      for (const example of examples) {
        const article = cleanAndTruncate(field(example, dataset.articleKey, path), docMaxLength);
        const summary = cleanAndTruncate(field(example, dataset.summaryKey, path));
        if (splitName === 'train') {
          const articleLength = pySplit(article).length;
          // HELM tests these with `if max_length and …`, so 0 means no limit.
          if (samplingMaxLength && articleLength > samplingMaxLength) continue;
          if (samplingMinLength && articleLength < samplingMinLength) continue;
          if (this.datasetName === 'xsum' && xsumFilter(article, summary)) continue;
        }
        instances.push(instance({ input: { text: article }, references: [reference(summary, [CORRECT_TAG])], split }));
      }
    }
    return instances;
  }
}

function field(example: PickleValue, key: string, path: string): string {
  const value = example instanceof Map ? example.get(key) : undefined;
  if (typeof value !== 'string') throw new HelmError('KeyError', `'${key}': an example in ${path} has no text under "${key}".`);
  return value;
}

/** HELM's `_clean_and_truncate`: newlines to spaces, whitespace runs to one space, at most `maxLength` words. */
export function cleanAndTruncate(text: string, maxLength?: number | null): string {
  const words = pySplit(text.replaceAll('\n', ' '));
  return (maxLength === undefined || maxLength === null ? words : words.slice(0, maxLength)).join(' ');
}

/** HELM's `_xsum_filter`: true for XSum training pairs to drop. */
export function xsumFilter(article: string, summary: string): boolean {
  const articleLength = pySplit(article).length;
  const summaryLength = pySplit(summary).length;
  if (article.includes('Media playback is unsupported on your device')) return true;
  if (article.includes('Last updated at')) return true;
  if (summaryLength <= 10) return true;
  if (articleLength === 0) throw new HelmError('Exception', 'ZeroDivisionError: an XSum training article is empty after cleaning.');
  return summaryLength / articleLength > 0.2;
}

const optionalInt = () => intArg().nullable().optional();

export const summarizationDefinition = defineScenario(
  SummarizationScenario.className,
  { dataset_name: stringArg(), sampling_min_length: optionalInt(), sampling_max_length: optionalInt(), doc_max_length: optionalInt() },
  (args) =>
    new SummarizationScenario(args.dataset_name, {
      samplingMinLength: args.sampling_min_length ?? undefined,
      samplingMaxLength: args.sampling_max_length ?? undefined,
      docMaxLength: args.doc_max_length ?? undefined,
    }),
);

