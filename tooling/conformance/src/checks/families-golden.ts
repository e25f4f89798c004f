import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { FAMILY_REGISTRY } from '@flexhelm/engine';
import type { CheckResult } from '../check-result.js';
import { checkGolden, type Golden } from './llama-golden.js';

/**
 * Checks `families/<model>/golden.json` (check.md's family sections) with the same cases as `llama/` when the family
 * registry implements its `model_type`; a family it does not is reported as not run, with the reason.
 */
export async function check(path: string): Promise<CheckResult> {
  const g = JSON.parse(readFileSync(path, 'utf8')) as Golden & { config?: { model_type?: unknown } };
  const type = String(g.config?.model_type);
  if (!FAMILY_REGISTRY.has(type)) {
    const model = basename(dirname(path));
    return { passed: 0, failed: 0, failures: [], notRun: 1, notRunReasons: [`${model}: model_type ${type} not checked: the family registry has no such model_type`] };
  }
  return checkGolden(g, dirname(path));
}
