import { escapeRegExpIgnoreCase, formatPyNumber, isPyFloat, PY_WORD_CLASS, type PyNumber, type PythonRandom, toNumber } from '@flexhelm/python-compat';
import { matchCase } from './match-case.js';
import { HelmError, perturbationDescription, type PerturbationDescription } from '@flexhelm/core';
import { readJsonFile, resolveDataPath, type DataOptions } from './data-files.js';
import { helmGenderMappings } from './helm-word-lists.js';
import { Perturbation, checkProbability } from './perturbation.js';

export const GENDER_MODES = ['terms', 'pronouns'] as const;
/** The genders of HELM's own mappings, in tuple order. */
export const DEFAULT_GENDERS = ['neutral', 'female', 'male'] as const;

export interface GenderOptions {
  /** `"terms"` (son → daughter…) or `"pronouns"` (he → she…). */
  mode: string;
  prob: PyNumber;
  /** Source gender, case-insensitive: one of the mapping's genders (`neutral`, `female`, `male` by default). */
  sourceClass: string;
  targetClass: string;
  /** A JSON list of word tuples replacing HELM's mappings; used only together with `mappingFileGenders`. */
  mappingFilePath?: string;
  /** The gender of each tuple position in `mappingFilePath`. */
  mappingFileGenders?: readonly string[];
  /** Also map target-gender words back to the source gender. */
  bidirectional?: boolean;
}

/**
 * `GenderPerturbation`: for each (source word, target word) pair in turn, every occurrence of the source word between
 * two non-word characters is replaced (case kept) with probability `prob` (`uniform(0, 1) < prob` per occurrence).
 * The delimiters are consumed by the match, so a word at the very start or end of the text is never replaced, and of
 * two words one character apart only the first can be. Input and references are perturbed.
 */
export class GenderPerturbation extends Perturbation {
  readonly name = 'gender';
  override readonly shouldPerturbReferences = true;
  readonly mode: string;
  readonly prob: PyNumber;
  readonly sourceClass: string;
  readonly targetClass: string;
  readonly bidirectional: boolean;
  /** The (word, replacement) pairs applied, in order. */
  readonly wordSynonymPairs: [string, string][];
  private readonly patterns: RegExp[];

  /**
   * `mappings`: word tuples, one word per gender of `genders` (HELM's own terms or pronouns, see {@link create}).
   */
  constructor(options: GenderOptions, mappings: readonly (readonly string[])[], genders: readonly string[] = DEFAULT_GENDERS) {
    super();
    if (!(GENDER_MODES as readonly string[]).includes(options.mode)) {
      throw new HelmError('AssertionError', `GenderPerturbation: mode must be "terms" or "pronouns" (got ${JSON.stringify(options.mode)}).`);
    }
    checkProbability('GenderPerturbation', toNumber(options.prob));
    this.mode = options.mode;
    this.prob = options.prob;
    this.sourceClass = options.sourceClass.toLowerCase();
    this.targetClass = options.targetClass.toLowerCase();
    this.bidirectional = options.bidirectional ?? false;
    if (mappings.length === 0) throw new HelmError('AssertionError', 'GenderPerturbation: the word mappings are empty.');
    for (const cls of [this.sourceClass, this.targetClass]) {
      if (!genders.includes(cls)) {
        throw new HelmError('AssertionError', `GenderPerturbation: "${cls}" is not one of the mapping's genders (${genders.join(', ')}).`);
      }
    }
    const bad = mappings.find((m) => m.length !== genders.length);
    if (bad) {
      throw new HelmError('AssertionError', `GenderPerturbation: every mapping needs one word per gender (${genders.length}); ${JSON.stringify(bad)} has ${bad.length}.`);
    }
    // Both classes are among the genders and every mapping has one word per gender (checked above).
    const source = mappings.map((m) => m[genders.indexOf(this.sourceClass)]!);
    const target = mappings.map((m) => m[genders.indexOf(this.targetClass)]!);
    this.wordSynonymPairs = source.map((word, i) => [word, target[i]!]);
    if (this.bidirectional) this.wordSynonymPairs.push(...target.map((word, i): [string, string] => [word, source[i]!]));
    this.patterns = this.wordSynonymPairs.map(
      ([word]) => new RegExp(`[^${PY_WORD_CLASS}](${escapeRegExpIgnoreCase(word)})[^${PY_WORD_CLASS}]`, 'giu'),
    );
  }

  /** With HELM's mappings for `mode`, or the `mappingFilePath` ones when `mappingFileGenders` is given too. */
  static async create(options: GenderOptions, dataOptions?: DataOptions): Promise<GenderPerturbation> {
    if (options.mappingFilePath && options.mappingFileGenders && options.mappingFileGenders.length > 0) {
      const mappings = await loadGenderMappings(resolveDataPath(options.mappingFilePath, dataOptions));
      return new GenderPerturbation(options, mappings, options.mappingFileGenders.map((g) => g.toLowerCase()));
    }
    const helm = await helmGenderMappings(dataOptions);
    return new GenderPerturbation(options, options.mode === 'terms' ? helm.terms : helm.pronouns);
  }

  override get description(): PerturbationDescription {
    return perturbationDescription(this.name, {
      fairness: true,
      mode: this.mode,
      prob: this.prob,
      source_class: this.sourceClass,
      target_class: this.targetClass,
      bidirectional: this.bidirectional,
    });
  }

  perturb(text: string, rng: PythonRandom): string {
    const prob = toNumber(this.prob);
    this.wordSynonymPairs.forEach(([, synonym], i) => {
      text = text.replace(this.patterns[i]!, (whole: string, word: string) => {
        if (rng.uniform(0, 1) < prob) return whole.split(word).join(matchCase(word, synonym));
        return whole;
      });
    });
    return text;
  }
}

/** HELM's `load_mappings`: a JSON list of lists, every element as `str(e).lower()`. */
async function loadGenderMappings(path: string): Promise<string[][]> {
  const parsed = await readJsonFile(path, 'the gender mapping file');
  if (!Array.isArray(parsed) || !parsed.every(Array.isArray)) {
    throw new HelmError('ValueError', `The gender mapping file ${path} must hold a JSON list of lists of words, e.g. [["child", "daughter", "son"]].`);
  }
  return (parsed as unknown[][]).map((tuple) => tuple.map((e) => pythonStr(e).toLowerCase()));
}

function pythonStr(e: unknown): string {
  if (typeof e === 'string') return e;
  if (typeof e === 'number' || isPyFloat(e)) return formatPyNumber(e as PyNumber);
  if (typeof e === 'boolean') return e ? 'True' : 'False';
  if (e === null) return 'None';
  throw new HelmError('ValueError', `Gender mapping entries must be words; got ${JSON.stringify(e)}.`);
}
