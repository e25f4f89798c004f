import { formatPyNumber, PyFloat, pyJsonDumps, pyJsonParse, type PyJsonValue, toPlain } from '@flexhelm/python-compat';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { helmJson, withInstanceIds, type Instance, type ObjectSpec } from '@flexhelm/core';
import { getRunInstances } from '@flexhelm/adapters';
import { createScenario } from '@flexhelm/scenarios';
import { CaseRecorder, describeDifference, type CheckResult } from '../check-result.js';

type GoldenMap = ReadonlyMap<string, PyJsonValue>;

/**
 * Python's `json.dumps(x, ensure_ascii=False, sort_keys=True, separators=(',', ':'))`: the form `meta.sha256_all`
 * hashes. Only control characters, `"` and `\` are escaped, which is exactly what `JSON.stringify` does to a string.
 */
function compactSortedJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number' || value instanceof PyFloat) return formatPyNumber(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(compactSortedJson).join(',')}]`;
  const entries = (value instanceof Map ? [...value.entries()] : Object.entries(value as object)).filter(([, v]) => v !== undefined);
  // Python sorts str keys by code point; JS's default sort compares UTF-16 units, the same for BMP keys.
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${compactSortedJson(v)}`).join(',')}}`;
}

function sha256All(instances: readonly Instance[]): string {
  const hash = createHash('sha256');
  instances.forEach((inst, i) => { hash.update((i > 0 ? '\n' : '') + compactSortedJson(inst), 'utf8'); });
  return hash.digest('hex');
}

function countBySplit(instances: readonly Instance[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const inst of instances) counts.set(inst.split ?? 'None', (counts.get(inst.split ?? 'None') ?? 0) + 1);
  return counts;
}

function sameJson(expected: unknown, actual: unknown): string | undefined {
  return describeDifference(JSON.stringify(expected), JSON.stringify(actual));
}

/** Checks `helm/synthetic.json`: counts, stored instances, the sha256 over all instances, and eval-instance selection. */
export async function check(path: string): Promise<CheckResult> {
  const golden = pyJsonParse(await readFile(path, 'utf8')) as GoldenMap;
  const recorder = new CaseRecorder();
  for (const config of golden.get('configs') as GoldenMap[]) {
    const label = config.get('config') as string;
    let instances: Instance[] = [];
    let generated = false;
    await recorder.check(`${label} generate`, async () => {
      const spec = toPlain(config.get('scenario_spec')!) as ObjectSpec;
      const scenario = createScenario(spec);
      instances = withInstanceIds(await scenario.getInstances({ outputPath: '' }));
      generated = true;
      if (scenario.name !== config.get('scenario_name')) return `scenario name ${scenario.name}, expected ${String(config.get('scenario_name'))}`;
      return undefined;
    });

    await recorder.check(`${label} counts`, () => {
      if (!generated) return 'no instances generated';
      const expected = { total: toPlain(config.get('total_count')!), ...(toPlain(config.get('counts')!) as object) };
      const actual = { total: instances.length, ...Object.fromEntries(countBySplit(instances)) };
      return sameJson(expected, actual);
    });

    const bySplit = config.get('instances_by_split') as ReadonlyMap<string, PyJsonValue[]>;
    for (const [split, stored] of bySplit) {
      const ours = instances.filter((inst) => inst.split === split);
      for (const [i, goldenInstance] of stored.entries()) {
        const id = (goldenInstance as GoldenMap).get('id');
        await recorder.check(`${label} ${split}[${i}] (${String(id)})`, () => {
          if (i >= ours.length) return `only ${ours.length} ${split} instances generated`;
          return describeDifference(pyJsonDumps(goldenInstance, 2), helmJson(ours[i]));
        });
      }
    }

    await recorder.check(`${label} sha256_all`, () => {
      if (!generated) return 'no instances generated';
      const expected = config.get('sha256_all') as string;
      const actual = sha256All(instances);
      return actual === expected ? undefined : `sha256 ${actual}, expected ${expected}`;
    });

    for (const selection of config.get('run_instance_selection') as GoldenMap[]) {
      const max = selection.get('max_eval_instances') as number;
      await recorder.check(`${label} run instances max_eval_instances=${max}`, () => {
        if (!generated) return 'no instances generated';
        const run = getRunInstances(instances, max);
        const train = run.filter((inst) => inst.split === 'train');
        const evalAvailable = instances.filter((inst) => inst.split === 'valid' || inst.split === 'test').length;
        const expected = {
          num_train_kept: selection.get('num_train_kept'),
          num_eval_available: selection.get('num_eval_available'),
          selected_eval_ids: toPlain(selection.get('selected_eval_ids')!),
        };
        const actual = {
          num_train_kept: train.length,
          num_eval_available: evalAvailable,
          selected_eval_ids: run.slice(train.length).map((inst) => inst.id),
        };
        return sameJson(expected, actual);
      });
    }
  }
  return recorder.result();
}
