import { pyJsonDumps, pyJsonParse, type PyJsonValue, toPlain } from '@flexhelm/python-compat';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { HelmError, helmJson, instance, type Instance, type ObjectSpec } from '@flexhelm/core';
import { DataAugmenter, createPerturbation, localHelmSourceDir, type DataOptions, type Perturbation } from '@flexhelm/augmentation';
import { CaseRecorder, describeDifference, type CheckResult } from '../check-result.js';

type GoldenMap = ReadonlyMap<string, PyJsonValue>;

function get(map: PyJsonValue | undefined, key: string): PyJsonValue | undefined {
  return map instanceof Map ? map.get(key) : undefined;
}

function toInstance(value: PyJsonValue): Instance {
  return instance(toPlain(value) as Instance);
}

function toSpec(value: PyJsonValue): ObjectSpec {
  return { class_name: get(value, 'class_name') as string, args: get(value, 'args') as unknown as ObjectSpec['args'] };
}

/**
 * Where HELM's own word lists (contraction map, misspellings, …) are read from: `FLEXHELM_HELM_SOURCE_DIR` (a HELM
 * v0.2.1 checkout), the package's `helm-data/`, or the download cache under the working folder. Never the network.
 */
export function helmSourceDir(): string | undefined {
  const local = localHelmSourceDir();
  if (local) return local;
  const cache = resolve('benchmark_output/perturbations/helm_v0.2.1');
  return existsSync(cache) ? cache : undefined;
}

/**
 * flexhelm does not ship HELM's word lists (project rule: nothing from HELM's source is committed), and CI has no
 * network to fetch them. When no copy is configured, the cases that need them cannot run at all: they are reported
 * as not run (with how to run them) instead of as failures of the implementation. With a copy configured, any
 * problem loading them is a failure like any other.
 */
export function missingHelmLists(err: unknown, configured: boolean): boolean {
  return !configured && err instanceof HelmError && err.pythonClass === 'FileNotFoundError' && /helm_v0\.2\.1/.test(err.message);
}

export const MISSING_LISTS =
  "needs HELM v0.2.1's own word lists (contraction map, misspellings, filler words, keyboard neighbours, gender terms), which flexhelm does not ship; set FLEXHELM_HELM_SOURCE_DIR to a HELM v0.2.1 checkout, or place one at helm-v0.2.1/ beside the conformance folder, to run it";

/** Writes the golden file's own mapping/name files where the spec's relative path points (inside `baseDir`). */
async function writeOurDataFile(golden: GoldenMap, spec: ObjectSpec, baseDir: string): Promise<void> {
  const args = spec.args as unknown as PyJsonValue;
  const namesPath = get(args, 'name_file_path');
  if (typeof namesPath === 'string') {
    await mkdir(dirname(join(baseDir, namesPath)), { recursive: true });
    await writeFile(join(baseDir, namesPath), golden.get('our_person_names_file') as string);
  }
  const mappingPath = get(args, 'mapping_file_path');
  if (typeof mappingPath === 'string' && spec.class_name.endsWith('DialectPerturbation')) {
    await mkdir(dirname(join(baseDir, mappingPath)), { recursive: true });
    await writeFile(join(baseDir, mappingPath), pyJsonDumps(golden.get('our_dialect_mapping') ?? null));
  }
}

/** The canonical perturbations the data-augmenter case names (by class), built from `meta.canonical_specs`. */
async function canonicalPerturbations(golden: GoldenMap, augmenterCase: PyJsonValue, data: DataOptions): Promise<Perturbation[]> {
  const canonical = (get(golden.get('meta'), 'canonical_specs') as PyJsonValue[]).map(toSpec);
  const perturbations: Perturbation[] = [];
  for (const name of get(augmenterCase, 'perturbations') as string[]) {
    const spec = canonical.find((s) => s.class_name.endsWith(`.${name}`));
    if (!spec) throw new Error(`meta.canonical_specs has no spec for ${name}`);
    perturbations.push(await createPerturbation(spec, data));
  }
  return perturbations;
}

/**
 * helm/perturbations.json: each perturbation's output for each (instance, seed) — input text, references, changed
 * flag and description — is one case; the data-augmenter run over the canonical perturbations is one more.
 */
export async function check(path: string): Promise<CheckResult> {
  const golden = pyJsonParse(await readFile(path, 'utf8')) as GoldenMap;
  const recorder = new CaseRecorder();
  const instances = (golden.get('instances') as PyJsonValue[]).map(toInstance);
  const byId = new Map(instances.map((inst) => [inst.id!, inst]));
  const baseDir = await mkdtemp(join(tmpdir(), 'flexhelm-perturbations-'));
  const configured = helmSourceDir() !== undefined;
  const data: DataOptions = { baseDir, offline: true, helmSourceDir: helmSourceDir() };
  try {
    for (const entry of golden.get('perturbations') as PyJsonValue[]) {
      const label = get(entry, 'label') as string;
      const spec = toSpec(get(entry, 'perturbation_spec')!);
      let perturbation: Perturbation | undefined;
      let creationError: unknown;
      try {
        if (get(entry, 'uses_our_data_file') === true) await writeOurDataFile(golden, spec, baseDir);
        perturbation = await createPerturbation(spec, data);
      } catch (err) {
        creationError = err;
      }
      if (missingHelmLists(creationError, configured)) {
        for (let k = 0; k < (get(entry, 'outputs') as PyJsonValue[]).length; k++) recorder.notRun(MISSING_LISTS);
        continue;
      }
      for (const output of get(entry, 'outputs') as PyJsonValue[]) {
        const id = get(output, 'instance_id') as string;
        const seed = get(output, 'seed') as number | null;
        await recorder.check(`${label} ${id} seed=${seed}`, () => {
          if (!perturbation) throw creationError;
          if (perturbation.shouldPerturbReferences !== get(entry, 'should_perturb_references')) {
            return `should_perturb_references is ${perturbation.shouldPerturbReferences}`;
          }
          const original = byId.get(id);
          if (!original) return `no instance ${id} in the file`;
          const perturbed = perturbation.apply(original, seed ?? undefined);
          const expectedText = get(output, 'output') as string;
          const textProblem = describeDifference(expectedText, perturbed.input.text);
          if (textProblem) return `input ${textProblem}`;
          if ((perturbed.input.text !== original.input.text) !== get(output, 'changed')) return 'changed flag differs';
          const refs = perturbed.references.map((r) => r.output.text);
          const refProblem = describeDifference(JSON.stringify(toPlain(get(output, 'references_out')!)), JSON.stringify(refs));
          if (refProblem) return `references ${refProblem}`;
          const descProblem = describeDifference(pyJsonDumps(get(output, 'perturbation_description')!, 2), helmJson(perturbed.perturbation));
          if (descProblem) return `description ${descProblem}`;
          return undefined;
        });
      }
    }

    const augmenterCase = golden.get('data_augmenter_canonical_without_downloads');
    if (augmenterCase !== undefined) {
      let perturbations: Perturbation[] | undefined;
      let setupError: unknown;
      try {
        perturbations = await canonicalPerturbations(golden, augmenterCase, data);
      } catch (err) {
        setupError = err;
      }
      if (missingHelmLists(setupError, configured)) recorder.notRun(MISSING_LISTS);
      else {
        await recorder.check('data_augmenter_canonical_without_downloads', () => {
          if (!perturbations) throw setupError;
          const args = get(augmenterCase, 'args');
          const generated = new DataAugmenter(perturbations).generate(instances, {
            includeOriginal: get(args, 'include_original') as boolean,
            skipUnchanged: get(args, 'skip_unchanged') as boolean,
            seedsPerInstance: get(args, 'seeds_per_instance') as number,
          });
          return describeDifference(pyJsonDumps(get(augmenterCase, 'instances')!, 2), helmJson(generated));
        });
      }
    }
  } finally {
    await rm(baseDir, { recursive: true, force: true });
  }
  return recorder.result();
}
