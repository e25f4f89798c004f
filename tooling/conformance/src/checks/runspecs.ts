import { pyJsonDumps, pyJsonParse, type PyJsonValue } from '@flexhelm/python-compat';
import { readFile } from 'node:fs/promises';
import { HelmError, helmJson, type RunEntry, type RunSpec } from '@flexhelm/core';
import { parseObjectSpec, runEntriesToRunSpecs, type RunEntriesOptions } from '@flexhelm/run-spec';
import { CaseRecorder, describeDifference, type CheckResult } from '../check-result.js';

type PyMap = ReadonlyMap<string, PyJsonValue>;

const get = (m: PyJsonValue, key: string): PyJsonValue => (m as PyMap).get(key);
const has = (m: PyJsonValue, key: string): boolean => (m as PyMap).has(key);
const list = (v: PyJsonValue): PyJsonValue[] => (v ?? []) as PyJsonValue[];
const str = (v: PyJsonValue): string => v as string;

/** What happened when we ran a call: its RunSpecs or the Python class of the HelmError it raised. */
function attempt<T>(body: () => T): { value: T } | { errorClass: string; message: string } {
  try {
    return { value: body() };
  } catch (err) {
    if (err instanceof HelmError) return { errorClass: err.pythonClass, message: err.message };
    throw err;
  }
}

function compareList(what: string, expected: PyJsonValue, actual: string[]): string | undefined {
  return describeDifference(pyJsonDumps(expected), pyJsonDumps(actual)) && `${what}: expected ${pyJsonDumps(expected)}, got ${pyJsonDumps(actual)}`;
}

/** Checks the RunSpecs a call produced against one golden record (count, names, models, full and compact specs). */
async function checkRunSpecs(rec: CaseRecorder, label: string, golden: PyJsonValue, ours: RunSpec[]): Promise<void> {
  await rec.check(`${label} count`, () => (ours.length === get(golden, 'count') ? undefined : `expected ${String(get(golden, 'count'))} run specs, got ${ours.length}`));
  if (has(golden, 'names')) await rec.check(`${label} names`, () => compareList('names', get(golden, 'names'), ours.map((r) => r.name)));
  if (has(golden, 'models')) await rec.check(`${label} models`, () => compareList('models', get(golden, 'models'), ours.map((r) => r.adapter_spec.model)));
  const byName = new Map(ours.map((r) => [r.name, r]));
  for (const [index, full] of list(get(golden, 'run_specs')).entries()) {
    const name = str(get(full, 'name'));
    await rec.check(`${label} run_spec ${name}`, () => {
      const mine = has(golden, 'names') ? byName.get(name) : ours[index];
      if (!mine) return `no run spec named ${name}`;
      return describeDifference(pyJsonDumps(full, 2), helmJson(mine));
    });
  }
  for (const compact of list(get(golden, 'other_models_compact'))) {
    const name = str(get(compact, 'name'));
    await rec.check(`${label} compact ${name}`, () => {
      const mine = byName.get(name);
      if (!mine) return `no run spec named ${name}`;
      if (mine.adapter_spec.model !== get(compact, 'model')) return `model: expected ${String(get(compact, 'model'))}, got ${mine.adapter_spec.model}`;
      return describeDifference(pyJsonDumps(get(compact, 'adapter_spec'), 2), helmJson(mine.adapter_spec));
    });
  }
}

/** helm/runspecs.json: description → RunSpecs (or HELM's error class), plus run_entries_to_run_specs calls. */
export async function check(path: string): Promise<CheckResult> {
  const golden = pyJsonParse(await readFile(path, 'utf8'));
  const rec = new CaseRecorder();

  for (const entry of list(get(golden, 'entries'))) {
    const description = str(get(entry, 'description'));
    const label = JSON.stringify(description);

    if (has(entry, 'parsed_object_spec_error')) {
      await rec.check(`${label} parse error`, () => {
        const r = attempt(() => parseObjectSpec(description));
        const want = get(get(entry, 'parsed_object_spec_error'), 'error_class');
        return 'errorClass' in r && r.errorClass === want ? undefined : `expected ${String(want)} from parseObjectSpec, got ${'errorClass' in r ? r.errorClass : 'a result'}`;
      });
    } else {
      await rec.check(`${label} parsed_object_spec`, () => describeDifference(pyJsonDumps(get(entry, 'parsed_object_spec')), pyJsonDumps(parseObjectSpec(description) as unknown as PyJsonValue)));
    }

    // HELM checks scenario arguments only when the scenario runs; compare with HELM's own construction.
    const call = () => runEntriesToRunSpecs([{ description, priority: 1 }], { maxEvalInstances: 1000, numTrainTrials: 3, checkScenarioArguments: false });
    if (has(entry, 'not_produced')) {
      // HELM downloads data while building this run spec; flexhelm must refuse with a clear error instead of guessing.
      await rec.check(`${label} not produced without its data`, () => {
        const r = attempt(call);
        return 'errorClass' in r ? undefined : 'expected an error asking for the data HELM downloads, got run specs';
      });
      continue;
    }
    if (has(entry, 'error')) {
      await rec.check(`${label} error`, () => {
        const r = attempt(call);
        const want = get(get(entry, 'error'), 'error_class');
        if (!('errorClass' in r)) return `expected ${String(want)}, got ${r.value.length} run specs`;
        return r.errorClass === want ? undefined : `expected ${String(want)}, got ${r.errorClass}: ${r.message}`;
      });
      continue;
    }
    const r = attempt(call);
    if ('errorClass' in r) {
      await rec.check(`${label}`, () => `unexpected ${r.errorClass}: ${r.message}`);
      continue;
    }
    await checkRunSpecs(rec, label, entry, r.value);
  }

  for (const [index, extra] of list(get(golden, 'extra_calls')).entries()) {
    const label = `extra_calls[${index}] (${str(get(extra, 'note'))})`;
    const args = get(extra, 'args');
    const entries: RunEntry[] = list(get(args, 'run_entries')).map((e) => ({
      description: str(get(e, 'description')),
      priority: get(e, 'priority') as number,
      ...(has(e, 'groups') && get(e, 'groups') !== null ? { groups: list(get(e, 'groups')) as string[] } : {}),
    }));
    const num = (key: string) => (has(args, key) && get(args, key) !== null ? (get(args, key) as number) : undefined);
    const strings = (key: string) => (has(args, key) && get(args, key) !== null ? (list(get(args, key)) as string[]) : undefined);
    const options: RunEntriesOptions = {
      maxEvalInstances: num('max_eval_instances'),
      numTrainTrials: num('num_train_trials'),
      priority: num('priority'),
      modelsToRun: strings('models_to_run'),
      groupsToRun: strings('groups_to_run'),
      checkScenarioArguments: false,
    };
    const r = attempt(() => runEntriesToRunSpecs(entries, options));
    if (has(extra, 'error')) {
      const want = get(get(extra, 'error'), 'error_class');
      await rec.check(`${label} error`, () =>
        'errorClass' in r ? (r.errorClass === want ? undefined : `expected ${String(want)}, got ${r.errorClass}: ${r.message}`) : `expected ${String(want)}, got ${r.value.length} run specs`,
      );
    } else if ('errorClass' in r) await rec.check(label, () => `unexpected ${r.errorClass}: ${r.message}`);
    else await checkRunSpecs(rec, label, extra, r.value);
  }
  return rec.result();
}
