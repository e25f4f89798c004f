import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import { HelmError, parseRunSpec, parseStats, type RunSpec, type Stat } from '@flexhelm/core';
import { comparePyStrings, pyJsonParse } from '@flexhelm/python-compat';
import { pyPathJoin } from './py-path-join.js';
import type { SummarizeWarn } from './warning-digest.js';

/** HELM's `Run`: a run folder of the suite with its spec and stats. */
export interface SuiteRun {
  /** The folder name under `runs/<suite>/`. */
  dirName: string;
  /** `os.path.join(output_path, "runs", suite, dir)` as HELM writes it into runs.json (the path as typed). */
  runPath: string;
  /** The folder on disk, symlinks resolved. */
  realDir: string;
  runSpec: RunSpec;
  stats: Stat[];
}

/** Whether `path` is `root` or inside it (both real paths). */
export function isInside(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * Reads a JSON file of a run folder, refusing one that resolves outside `root` (a symlink planted in the output
 * folder must not make summarize read, or later write beside, files elsewhere).
 */
export function readRunJson(path: string, root: string): unknown {
  let real: string;
  try {
    real = realpathSync(path);
  } catch (err) {
    throw new HelmError('FileNotFoundError', `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
  }
  if (!isInside(root, real)) throw new HelmError('ValueError', `${path} is a link to ${real}, outside ${root}; summarize reads only files inside the output folder`);
  let text: string;
  try {
    text = readFileSync(real, 'utf8');
  } catch (err) {
    throw new HelmError('FileNotFoundError', `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
  }
  try {
    return pyJsonParse(text);
  } catch (err) {
    throw new HelmError('ValueError', `${path} is not valid JSON (${(err as Error).message}); was the run interrupted? Re-run it, or move its folder out of the suite`, { cause: err });
  }
}

/** The suite folder `<outputPath>/runs/<suite>` as HELM names it, checked to exist. */
export function suitePath(outputPath: string, suite: string): string {
  if (!suite || suite.includes('/') || suite === '.' || suite === '..') throw new HelmError('ValueError', `invalid suite name "${suite}": use a plain folder name such as "v1"`);
  const path = pyPathJoin(outputPath, 'runs', suite);
  if (!existsSync(path) || !statSync(path).isDirectory()) throw new HelmError('FileNotFoundError', `no suite folder ${path}; run \`flexhelm run --suite ${suite} …\` first, or pass the --output-path the runs were written to`);
  return path;
}

/**
 * HELM's `Summarizer.read_runs`: every folder of the suite except `eval_cache` and `groups`, in sorted order; a
 * folder without run_spec.json or stats.json is skipped with a warning, as HELM does. flexhelm also skips, with a
 * warning, a run folder that is a symlink leading outside the output folder (HELM would follow it); files
 * (runs.json, summary.json, …) are not run folders and are passed over silently.
 */
export function readSuiteRuns(outputPath: string, suite: string, warn: SummarizeWarn): SuiteRun[] {
  const suiteDir = suitePath(outputPath, suite);
  const outputRoot = realpathSync(outputPath);
  const names = readdirSync(suiteDir).filter((n) => n !== 'eval_cache' && n !== 'groups').sort(comparePyStrings);
  const runs: SuiteRun[] = [];
  for (const dirName of names) {
    const runPath = pyPathJoin(suiteDir, dirName);
    const entry = join(suiteDir, dirName);
    let realDir: string;
    try {
      realDir = realpathSync(entry);
    } catch {
      warn(`WARNING: ${dirName} is a broken link, skipping`, 'run-skipped');
      continue;
    }
    if (!statSync(realDir).isDirectory()) continue;
    if (lstatSync(entry).isSymbolicLink() && !isInside(outputRoot, realDir)) {
      warn(`WARNING: ${dirName} is a link to ${realDir}, outside ${outputPath}, skipping (copy the run into the suite to include it)`, 'run-skipped');
      continue;
    }
    if (!existsSync(join(realDir, 'run_spec.json')) || !existsSync(join(realDir, 'stats.json'))) {
      warn(`WARNING: ${dirName} doesn't have run_spec.json or stats.json, skipping`, 'run-skipped');
      continue;
    }
    const runSpec = parseRunSpec(readRunJson(join(realDir, 'run_spec.json'), realDir), join(runPath, 'run_spec.json'));
    const stats = parseStats(readRunJson(join(realDir, 'stats.json'), realDir), join(runPath, 'stats.json'));
    runs.push({ dirName, runPath, realDir, runSpec, stats });
  }
  return runs;
}
