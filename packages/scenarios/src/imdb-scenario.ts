import { pyListdir, pyStrip, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { boolArg, defineScenario } from './scenario-definition.js';

export const IMDB_URL = 'https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz';
export const IMDB_CONTRAST_URL = 'https://raw.githubusercontent.com/allenai/contrast-sets/main/IMDb/data/';

const LABELS: readonly (readonly [string, string])[] = [
  ['pos', 'Positive'],
  ['neg', 'Negative'],
];
const CONTRAST_LABELS = new Set(['Positive', 'Negative']);

export interface ImdbContrast {
  originalAnswer: string;
  contrastInput: string;
  contrastAnswer: string;
}

/**
 * HELM's `IMDBScenario`: movie-review sentiment (aclImdb train → train, test → valid). Reviews with an AllenAI
 * contrast version get it as contrast input and are evaluated (split valid). Files are read in `os.listdir` order,
 * which is the file system's, as in HELM.
 */
export class IMDBScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.imdb_scenario.IMDBScenario';
  readonly className = IMDBScenario.className;
  readonly name = 'imdb';
  readonly description = 'Sentiment analysis dataset.';
  readonly tags = ['sentiment_classification'];

  constructor(readonly onlyContrast = false) {}

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: IMDB_URL, path: 'data', unpack: 'tar.gz' });
    const contrastMap = await this.contrastMap(context, 'test');
    for (const [key, value] of await this.contrastMap(context, 'dev')) contrastMap.set(key, value);
    const instances: Instance[] = [];
    for (const [split, folder] of [
      [TRAIN_SPLIT, 'train'],
      [VALID_SPLIT, 'test'],
    ] as const) {
      instances.push(...(await this.splitInstances(split, join(dataPath, folder), contrastMap)));
    }
    return instances;
  }

  private async splitInstances(split: string, path: string, contrastMap: ReadonlyMap<string, ImdbContrast>): Promise<Instance[]> {
    const instances: Instance[] = [];
    for (const [folder, label] of LABELS) {
      const labelPath = join(path, folder);
      for (const file of await pyListdir(labelPath)) {
        const text = pyStrip(await readPythonText(join(labelPath, file)));
        const contrast = contrastMap.get(text);
        if (!contrast && this.onlyContrast && split === VALID_SPLIT) continue;
        instances.push(
          instance({
            input: { text },
            references: [reference(label, [CORRECT_TAG])],
            split: contrast ? VALID_SPLIT : split,
            contrast_inputs: contrast ? [{ text: contrast.contrastInput }] : undefined,
            contrast_references: contrast ? [[reference(contrast.contrastAnswer, [CORRECT_TAG])]] : undefined,
          }),
        );
      }
    }
    return instances;
  }

  private async contrastMap(context: ScenarioContext, mode: 'test' | 'dev'): Promise<Map<string, ImdbContrast>> {
    const lines: string[][] = [];
    for (const kind of ['original', 'contrast']) {
      const file = `${mode}_${kind}.tsv`;
      const path = await downloadSource(context, this.name, { url: IMDB_CONTRAST_URL + file, path: join('data', file) });
      lines.push(pythonLines(await readPythonText(path)).slice(1));
    }
    return imdbContrastMap(lines[0]!, lines[1]!, mode);
  }
}

/** Pairs the lines of `{mode}_original.tsv` and `{mode}_contrast.tsv` (`label\ttext`, header dropped) by position. */
export function imdbContrastMap(originalLines: readonly string[], contrastLines: readonly string[], mode: string): Map<string, ImdbContrast> {
  const map = new Map<string, ImdbContrast>();
  const parse = (line: string, where: string): [string, string] => {
    const parts = pyStrip(line).split('\t');
    if (parts.length !== 2) throw new HelmError('ValueError', `${where} should be "label<TAB>text", found ${parts.length} field(s).`);
    const [label, text] = parts as [string, string];
    if (!CONTRAST_LABELS.has(label)) throw new HelmError('KeyError', `'${label}': ${where} has a label other than Positive/Negative.`);
    return [label, text];
  };
  const count = Math.min(originalLines.length, contrastLines.length);
  for (let i = 0; i < count; i++) {
    const [originalLabel, originalText] = parse(originalLines[i]!, `line ${i + 2} of ${mode}_original.tsv`);
    const [contrastLabel, contrastText] = parse(contrastLines[i]!, `line ${i + 2} of ${mode}_contrast.tsv`);
    if (map.has(originalText)) throw new HelmError('AssertionError', `line ${i + 2} of ${mode}_original.tsv repeats a review.`);
    map.set(originalText, { originalAnswer: originalLabel, contrastInput: contrastText, contrastAnswer: contrastLabel });
  }
  return map;
}

export const imdbDefinition = defineScenario(IMDBScenario.className, { only_contrast: boolArg().default(false) }, (args) => new IMDBScenario(args.only_contrast));

