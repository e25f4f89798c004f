import { extractPythonAssignment, pyJsonParse, type PythonLiteral } from '@flexhelm/python-compat';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HelmError } from '@flexhelm/core';
import { ensureDataFile, type DataOptions } from './data-files.js';

/**
 * HELM keeps several perturbations' word lists in its own source (Python literals and one JSON file). flexhelm
 * does not copy them: it reads them at run time from HELM v0.2.1's files, pinned by SHA-256, from a local HELM
 * checkout (`helmSourceDir`) or downloaded once into `benchmark_output/perturbations/helm_v0.2.1/`.
 */
export const HELM_SOURCE_FILES = {
  'contraction_expansion_perturbation.py': '6ea71795aceea2cb3884ec4e6ab429b4d121e76494e06cb9f19a61d4f677e16e',
  'correct_to_misspelling.json': '2f8e118895e52426bacd0cd32dfd0c14708e845c910d129f2d03571fe9f75c8b',
  'filler_words_perturbation.py': '1d6cc6ac7e34e51c315b1b6052ce9373ec99670491a8b1cceb33a9a4faae0e02',
  'gender_perturbation.py': '14e5d0d78ce8bcf42a723c13bc284061e69dcf2a8ed44d4e97f0c3ae0e87652d',
  'typos_perturbation.py': '9df175670d9110a6449e7c8f545583f3b30ff0be4035b6995de2369fbd12a27c',
} as const;
export type HelmSourceFile = keyof typeof HELM_SOURCE_FILES;

const HELM_SOURCE_URL = 'https://raw.githubusercontent.com/stanford-crfm/helm/v0.2.1/src/helm/benchmark/augmentations/';
const HELM_SOURCE_CACHE = 'benchmark_output/perturbations/helm_v0.2.1';

/**
 * A folder in this package where a deployment may place HELM's files (`scripts/fetch-helm-data.mjs` fills it); it is
 * used when present. flexhelm's repository does not include it.
 */
export const BUNDLED_HELM_DATA_DIR = fileURLToPath(new URL('../helm-data/', import.meta.url));

/**
 * The local folder HELM's files are read from, if any: `helmSourceDir`, else `$FLEXHELM_HELM_SOURCE_DIR`, else
 * {@link BUNDLED_HELM_DATA_DIR} when it exists. `undefined` means they are fetched into the download cache.
 */
export function localHelmSourceDir(options: DataOptions = {}): string | undefined {
  return options.helmSourceDir ?? process.env.FLEXHELM_HELM_SOURCE_DIR ?? (existsSync(BUNDLED_HELM_DATA_DIR) ? BUNDLED_HELM_DATA_DIR : undefined);
}

const loaded = new Map<string, Promise<string>>();

/** The text of one of HELM v0.2.1's augmentation files, checked against its pinned hash. */
export function readHelmSourceFile(file: HelmSourceFile, options: DataOptions = {}): Promise<string> {
  const dir = localHelmSourceDir(options);
  const key = `${dir ?? ''}\0${options.baseDir ?? ''}\0${file}`;
  let text = loaded.get(key);
  if (!text) {
    text = locate(file, dir, options).then(async (path) => verify(file, path, await readFile(path)));
    text.catch(() => loaded.delete(key)); // a failed load may succeed later (file added, network back)
    loaded.set(key, text);
  }
  return text;
}

async function locate(file: HelmSourceFile, dir: string | undefined, options: DataOptions): Promise<string> {
  if (dir) {
    const candidates = [join(dir, 'src/helm/benchmark/augmentations', file), join(dir, file)];
    const found = candidates.find((p) => existsSync(p));
    if (!found) {
      throw new HelmError('FileNotFoundError', `HELM's ${file} is not in ${dir} (looked at ${candidates.join(' and ')}); point helmSourceDir / FLEXHELM_HELM_SOURCE_DIR at a HELM v0.2.1 checkout.`);
    }
    return found;
  }
  try {
    return await ensureDataFile(HELM_SOURCE_URL + file, `${HELM_SOURCE_CACHE}/${file}`, options);
  } catch (err) {
    const message = `${(err as Error).message} Alternatively point helmSourceDir / FLEXHELM_HELM_SOURCE_DIR at a HELM v0.2.1 checkout.`;
    throw err instanceof HelmError ? new HelmError(err.pythonClass, message, { cause: err }) : err;
  }
}

function verify(file: HelmSourceFile, path: string, bytes: Buffer): string {
  const digest = createHash('sha256').update(bytes).digest('hex');
  if (digest !== HELM_SOURCE_FILES[file]) {
    throw new HelmError('ValueError', `${path} is not HELM v0.2.1's ${file} (sha256 ${digest}, expected ${HELM_SOURCE_FILES[file]}); use the file from tag v0.2.1 unchanged.`);
  }
  return bytes.toString('utf8');
}

function fail(what: string, problem: string): never {
  throw new HelmError('ValueError', `HELM's ${what} has an unexpected shape: ${problem}`);
}

function stringList(value: PythonLiteral, what: string): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) fail(what, 'expected a list of strings');
  return value as string[];
}

function stringTuples(value: PythonLiteral, what: string): string[][] {
  if (!Array.isArray(value)) fail(what, 'expected a list of tuples');
  return value.map((t) => stringList(t, what));
}

/** `CONTRACTION_MAP` (contraction → expansion, in HELM's order). */
export async function helmContractionMap(options?: DataOptions): Promise<Map<string, string>> {
  const map = extractPythonAssignment(await readHelmSourceFile('contraction_expansion_perturbation.py', options), 'CONTRACTION_MAP');
  if (!(map instanceof Map) || ![...map.entries()].every(([k, v]) => typeof k === 'string' && typeof v === 'string')) {
    fail('CONTRACTION_MAP', 'expected a dict of strings');
  }
  return map as Map<string, string>;
}

/** `GENDER_TERM_MAPPINGS` and `GENDER_PRONOUN_MAPPINGS`: (neutral, female, male) tuples. */
export async function helmGenderMappings(options?: DataOptions): Promise<{ terms: string[][]; pronouns: string[][] }> {
  const source = await readHelmSourceFile('gender_perturbation.py', options);
  return {
    terms: stringTuples(extractPythonAssignment(source, 'GENDER_TERM_MAPPINGS'), 'GENDER_TERM_MAPPINGS'),
    pronouns: stringTuples(extractPythonAssignment(source, 'GENDER_PRONOUN_MAPPINGS'), 'GENDER_PRONOUN_MAPPINGS'),
  };
}

/** The filler phrase lists: speaker phrases, uncertain phrases, fill phrases. */
export async function helmFillerPhrases(options?: DataOptions): Promise<{ speaker: string[]; uncertain: string[]; fill: string[] }> {
  const source = await readHelmSourceFile('filler_words_perturbation.py', options);
  return {
    speaker: stringList(extractPythonAssignment(source, 'SPEAKER_PHRASES'), 'SPEAKER_PHRASES'),
    uncertain: stringList(extractPythonAssignment(source, 'UNCERTAIN_PHRASES'), 'UNCERTAIN_PHRASES'),
    fill: stringList(extractPythonAssignment(source, 'FILL_PHRASE'), 'FILL_PHRASE'),
  };
}

/** The typo keyboard: letter → the neighbouring keys it may be replaced by, in HELM's order. */
export async function helmKeyboardNeighbours(options?: DataOptions): Promise<Map<string, string>> {
  const source = await readHelmSourceFile('typos_perturbation.py', options);
  const neighbours = new Map<string, string>();
  for (const m of source.matchAll(/key_approx\["(.)"\] = "([a-z]+)"/g)) neighbours.set(m[1]!, m[2]!);
  if (neighbours.size !== 26) fail('typo keyboard', `found ${neighbours.size} keys, expected 26`);
  return neighbours;
}

/** `correct_to_misspelling.json`: correct word → its common misspellings, in file order. */
export async function helmMisspellings(options?: DataOptions): Promise<Map<string, string[]>> {
  const parsed = pyJsonParse(await readHelmSourceFile('correct_to_misspelling.json', options));
  if (!(parsed instanceof Map)) fail('correct_to_misspelling.json', 'expected an object');
  const map = new Map<string, string[]>();
  for (const [word, list] of parsed as Map<string, unknown>) {
    if (!Array.isArray(list) || list.length === 0 || !list.every((w) => typeof w === 'string')) fail('correct_to_misspelling.json', `entry "${word}"`);
    map.set(word, list as string[]);
  }
  return map;
}
