import { escapeRegExpIgnoreCase, PY_WORD_CLASS, type PyNumber, type PythonRandom, toNumber } from '@flexhelm/python-compat';
import { matchCase } from './match-case.js';
import { HelmError, perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { ensureDataFile, readJsonFile, resolveDataPath, type DataOptions } from './data-files.js';
import { Perturbation, checkProbability } from './perturbation.js';

/** HELM's downloadable dialect mappings, by `SOURCE_to_TARGET` (CodaLab bundle of Ziems et al. 2022's SAE→AAVE map). */
export const DIALECT_MAPPING_URLS: Readonly<Record<string, string>> = {
  SAE_to_AAVE: 'https://worksheets.codalab.org/rest/bundles/0x3523e02bd46b42bcad783292b40b4e38/contents/blob/',
};
const DIALECT_OUTPUT_PATH = 'benchmark_output/perturbations/dialect';

export interface DialectOptions {
  prob: PyNumber;
  /** Source dialect, case-insensitive (`SAE`). */
  sourceClass: string;
  targetClass: string;
  /** A JSON file `{source_word: [target words…]}`; without it HELM's SAE→AAVE map is downloaded. */
  mappingFilePath?: string;
}

/**
 * `DialectPerturbation`: each mapped word standing between two characters that are neither word characters nor
 * `-` is replaced, with probability `prob` (`uniform(0, 1) < prob`), by a random target-dialect form, case kept.
 * Like HELM, a word at the very start or end of the text never matches. Input and references are perturbed.
 */
export class DialectPerturbation extends Perturbation {
  readonly name = 'dialect';
  override readonly shouldPerturbReferences = true;
  readonly prob: PyNumber;
  readonly sourceClass: string;
  readonly targetClass: string;
  /** The path as given or as HELM names its download; written into the description. */
  readonly mappingFilePath: string;
  private readonly pattern: RegExp;

  constructor(options: DialectOptions & { mappingFilePath: string }, private readonly mapping: ReadonlyMap<string, readonly string[]>) {
    super();
    checkProbability('DialectPerturbation', toNumber(options.prob));
    this.prob = options.prob;
    this.sourceClass = options.sourceClass.toUpperCase();
    this.targetClass = options.targetClass.toUpperCase();
    this.mappingFilePath = options.mappingFilePath;
    const words = [...mapping.keys()].map(escapeRegExpIgnoreCase).join('|');
    this.pattern = new RegExp(`[^${PY_WORD_CLASS}-](${words})[^${PY_WORD_CLASS}-]`, 'giu');
  }

  /** Reads `mappingFilePath`, or downloads HELM's mapping for (source, target) like HELM does. */
  static async create(options: DialectOptions, dataOptions?: DataOptions): Promise<DialectPerturbation> {
    let path = options.mappingFilePath;
    if (!path) {
      const key = `${options.sourceClass.toUpperCase()}_to_${options.targetClass.toUpperCase()}`;
      const url = DIALECT_MAPPING_URLS[key];
      if (!url) {
        throw new HelmError('ValueError', `No dialect mapping from ${options.sourceClass.toUpperCase()} to ${options.targetClass.toUpperCase()} is available (only SAE → AAVE); pass mapping_file_path with your own JSON mapping.`);
      }
      path = `${DIALECT_OUTPUT_PATH}/${key}_mapping.json`;
      await ensureDataFile(url, path, dataOptions);
    }
    const mapping = await loadDialectMapping(resolveDataPath(path, dataOptions));
    return new DialectPerturbation({ ...options, mappingFilePath: path }, mapping);
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, {
      fairness: true,
      prob: this.prob,
      source_class: this.sourceClass,
      target_class: this.targetClass,
      mapping_file_path: this.mappingFilePath,
    });
  }

  perturb(text: string, rng: PythonRandom): string {
    const prob = toNumber(this.prob);
    return text.replace(this.pattern, (whole: string, word: string) => {
      if (!(rng.uniform(0, 1) < prob)) return whole;
      const synonyms = this.mapping.get(word.toLowerCase());
      if (synonyms === undefined) {
        throw new HelmError('KeyError', `'${word.toLowerCase()}': the dialect mapping matched "${word}" case-insensitively but has no lower-case key for it; make the mapping's keys lower case.`);
      }
      return whole.split(word).join(matchCase(word, rng.choice(synonyms)));
    });
  }
}

/** A dialect mapping file: a JSON object from source word to a non-empty list of target words (file order kept). */
export async function loadDialectMapping(path: string): Promise<Map<string, string[]>> {
  const parsed = await readJsonFile(path, 'the dialect mapping');
  if (!(parsed instanceof Map)) {
    throw new HelmError('ValueError', `The dialect mapping ${path} must be a JSON object like {"the": ["da"]}.`);
  }
  const mapping = new Map<string, string[]>();
  for (const [word, forms] of parsed as Map<string, unknown>) {
    if (!Array.isArray(forms) || !forms.every((f) => typeof f === 'string')) {
      throw new HelmError('ValueError', `In the dialect mapping ${path}, "${word}" must map to a list of strings.`);
    }
    mapping.set(word, forms as string[]);
  }
  return mapping;
}
