import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { checkerFor } from './registry.js';

export interface FileReport {
  file: string;
  status: 'checked' | 'skipped' | 'error';
  passed: number;
  failed: number;
  failures: string[];
  notRun: number;
  notRunReasons: string[];
  notes?: string[];
}

function listJsonFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d).sort()) {
      const p = join(d, entry);
      if (statSync(p).isDirectory()) walk(p);
      else if (entry.endsWith('.json')) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** Checks every golden file the runner knows under `dir` (laid out like `shared/conformance`). */
export async function runConformance(dir: string): Promise<FileReport[]> {
  const reports: FileReport[] = [];
  for (const path of listJsonFiles(dir)) {
    const rel = relative(dir, path).split('\\').join('/');
    const checker = await checkerFor(rel);
    if (checker === null) continue;
    if (checker === 'skipped') {
      reports.push({ file: rel, status: 'skipped', passed: 0, failed: 0, failures: [], notRun: 0, notRunReasons: [] });
      continue;
    }
    try {
      const r = await checker(path);
      reports.push({ file: rel, status: 'checked', ...r, notRun: r.notRun ?? 0, notRunReasons: r.notRunReasons ?? [] });
    } catch (err) {
      reports.push({ file: rel, status: 'error', passed: 0, failed: 1, notRun: 0, notRunReasons: [], failures: [`could not check the file: ${err instanceof Error ? err.stack ?? err.message : String(err)}`] });
    }
  }
  return reports;
}
