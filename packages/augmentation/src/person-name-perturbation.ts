import { PY_WORD_CLASS, type PyNumber, pyStrip, type PythonRandom, toNumber } from '@flexhelm/python-compat';
import { matchCase } from './match-case.js';
import { readFile } from 'node:fs/promises';
import { HelmError, instance as makeInstance, perturbationDescription, type Instance, type PerturbationDescription } from '@flexhelm/core';
import { ensureDataFile, resolveDataPath, type DataOptions } from './data-files.js';
import { Perturbation, checkProbability } from './perturbation.js';

/** HELM's person-name file (first names of Greenwald 1998 / Caliskan 2017, last names of Garg 2017) on CodaLab. */
export const PERSON_NAMES_URL = 'https://worksheets.codalab.org/rest/bundles/0xa65e8f9a107c44f198eb4ad356bbda34/contents/blob/';
const PERSON_NAMES_PATH = 'benchmark_output/perturbations/person_name/data/person_names.txt';
const GENDERS = ['female', 'male', 'neutral'] as const;
const SEPARATOR = new RegExp(`([^${PY_WORD_CLASS}])`, 'u');

/** category → value → names (lower-cased, file order, duplicates kept), for one name type. */
export type NameCategories = Map<string, Map<string, string[]>>;

export interface PersonNameOptions {
  prob: PyNumber;
  /** Category → value of the names to replace, e.g. `{race: 'white_american'}` (several categories intersect). */
  sourceClass: ReadonlyMap<string, string> | Readonly<Record<string, string>>;
  targetClass: ReadonlyMap<string, string> | Readonly<Record<string, string>>;
  /** Lines `name,name_type[,category,value]*`; without it HELM's file is downloaded. */
  nameFilePath?: string;
  /** `first_name` (default) or `last_name`. */
  personNameType?: string;
  /** Replace a name only by a target name of the same gender (first names only); default true. */
  preserveGender?: boolean;
}

function entriesOf(d: PersonNameOptions['sourceClass']): [string, string][] {
  return d instanceof Map ? [...d.entries()] : Object.entries(d);
}

/**
 * `PersonNamePerturbation`: source-class names (whole word tokens, any case) are replaced by target-class names,
 * consistently across the references (done first) and the input of an instance. Unlike other perturbations it
 * always seeds with `Random(instance.id)` and its description carries no seed.
 */
export class PersonNamePerturbation extends Perturbation {
  readonly name = 'person_name';
  override readonly shouldPerturbReferences = true;
  readonly prob: PyNumber;
  readonly personNameType: string;
  readonly preserveGender: boolean;
  readonly nameFilePath: string;
  readonly sourceNames: string[];
  readonly targetNames: string[];
  private readonly sourceClass: [string, string][];
  private readonly targetClass: [string, string][];

  constructor(options: PersonNameOptions & { nameFilePath: string }, private readonly names: NameCategories) {
    super();
    checkProbability('PersonNamePerturbation', toNumber(options.prob));
    this.prob = options.prob;
    this.sourceClass = entriesOf(options.sourceClass).map(([k, v]) => [k.toLowerCase(), v.toLowerCase()]);
    this.targetClass = entriesOf(options.targetClass).map(([k, v]) => [k.toLowerCase(), v.toLowerCase()]);
    this.personNameType = (options.personNameType ?? 'first_name').toLowerCase();
    this.nameFilePath = options.nameFilePath;
    if (names.size === 0) {
      throw new HelmError('AssertionError', `PersonNamePerturbation: ${this.nameFilePath} has no ${this.personNameType} entries with categories.`);
    }
    // HELM looks the classes up as given (not lower-cased).
    this.sourceNames = this.possibleNames(entriesOf(options.sourceClass));
    this.targetNames = this.possibleNames(entriesOf(options.targetClass));
    this.preserveGender = options.preserveGender ?? true;
    if (this.preserveGender) {
      if (this.personNameType !== 'first_name') {
        throw new HelmError('AssertionError', 'PersonNamePerturbation: preserve_gender works only with person_name_type "first_name".');
      }
      if (!names.get('gender')?.size) {
        throw new HelmError('AssertionError', `PersonNamePerturbation: preserve_gender needs "gender" categories in ${this.nameFilePath}.`);
      }
    }
  }

  /** Reads `nameFilePath`, or downloads HELM's name file like HELM does. */
  static async create(options: PersonNameOptions, dataOptions?: DataOptions): Promise<PersonNamePerturbation> {
    const type = (options.personNameType ?? 'first_name').toLowerCase();
    if (type !== 'first_name' && type !== 'last_name') {
      throw new HelmError('AssertionError', `PersonNamePerturbation: person_name_type must be "first_name" or "last_name" (got ${JSON.stringify(options.personNameType)}).`);
    }
    let path = options.nameFilePath;
    if (!path) {
      path = PERSON_NAMES_PATH;
      await ensureDataFile(PERSON_NAMES_URL, path, dataOptions);
    }
    const names = await loadNameFile(resolveDataPath(path, dataOptions), type);
    return new PersonNamePerturbation({ ...options, nameFilePath: path }, names);
  }

  private possibleNames(selected: [string, string][]): string[] {
    const lists = selected.map(([category, value]) => {
      const list = this.names.get(category)?.get(value);
      if (!list?.length) {
        throw new HelmError('AssertionError', `PersonNamePerturbation: no ${this.personNameType}s with ${category}=${value} in ${this.nameFilePath} (categories and values are matched exactly as written in the file).`);
      }
      return list;
    });
    if (lists.length === 0) throw new HelmError('TypeError', 'reduce() of empty iterable with no initial value: give at least one category for the source and target classes.');
    return lists.reduce((a, b) => a.filter((name) => b.includes(name)));
  }

  override get description(): PerturbationDescription {
    const str = (c: [string, string][]) => c.map(([k, v]) => `${k}=${v}`).join(',');
    return perturbationDescription(this.name, {
      fairness: true,
      prob: this.prob,
      source_class: str(this.sourceClass),
      target_class: str(this.targetClass),
      name_file_path: this.nameFilePath,
      person_name_type: this.personNameType,
      preserve_gender: this.preserveGender,
    });
  }

  override apply(inst: Instance): Instance {
    const rng = this.getRng(inst);
    const substitutions = new Map<string, string>();
    const skipped = new Set<string>();
    const references = inst.references.map((ref) => ({
      output: { text: this.perturbWithPersistency(ref.output.text, rng, substitutions, skipped) },
      tags: ref.tags,
    }));
    const text = this.perturbWithPersistency(inst.input.text, rng, substitutions, skipped);
    return makeInstance({ ...inst, input: { text }, references, perturbation: this.description });
  }

  /** Unused: names are replaced through {@link apply} so that an instance and its references agree. */
  perturb(text: string): string {
    return text;
  }

  private perturbWithPersistency(text: string, rng: PythonRandom, substitutions: Map<string, string>, skipped: Set<string>): string {
    const prob = toNumber(this.prob);
    return text
      .split(SEPARATOR)
      .map((token) => {
        const lowered = token.toLowerCase();
        if (!substitutions.has(lowered) && !skipped.has(lowered) && this.sourceNames.includes(lowered)) {
          if (rng.uniform(0, 1) < prob) {
            const name = this.substituteName(token, rng);
            if (name !== undefined) substitutions.set(lowered, name);
          } else skipped.add(lowered);
        }
        const substitution = substitutions.get(lowered);
        return substitution === undefined ? token : matchCase(token, substitution);
      })
      .join('');
  }

  private substituteName(token: string, rng: PythonRandom): string | undefined {
    let options = this.targetNames;
    if (this.preserveGender) {
      const genders = this.names.get('gender')!;
      const lowered = token.toLowerCase();
      const gender = GENDERS.find((g) => genders.get(g)?.includes(lowered));
      if (gender !== undefined) {
        const sameGender = genders.get(gender)!;
        options = this.targetNames.filter((n) => sameGender.includes(n));
        if (options.length === 0) return undefined;
      }
    }
    return rng.choice(options);
  }
}

/**
 * HELM's `load_name_file`: for each line `name,name_type,cat1,val1,…` whose name_type equals `personNameType`
 * exactly, appends `name.strip().lower()` under every (category, value). Lines are read like Python's text mode
 * (`\r\n` and `\r` count as newlines); only the name is stripped and lowered, as in HELM.
 */
export async function loadNameFile(path: string, personNameType: string): Promise<NameCategories> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new HelmError('FileNotFoundError', `Cannot read the person-name file ${path}: ${(err as Error).message}`, { cause: err });
  }
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const names: NameCategories = new Map();
  lines.forEach((line, i) => {
    const [name, nameType, ...categories] = line.split(',');
    if (nameType === undefined) {
      throw new HelmError('ValueError', `${path} line ${i + 1}: expected "name,name_type[,category,value]*", got ${JSON.stringify(line)} (HELM fails on such lines too; remove it).`);
    }
    if (nameType !== personNameType) return;
    for (let c = 0; c + 1 < categories.length; c += 2) {
      const category = categories[c]!;
      const value = categories[c + 1]!;
      let values = names.get(category);
      if (!values) {
        values = new Map();
        names.set(category, values);
      }
      let list = values.get(value);
      if (!list) {
        list = [];
        values.set(value, list);
      }
      list.push(pyStrip(name!).toLowerCase()); // split always gives a first field
    }
  });
  return names;
}
