import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HelmError, helmJson } from '@flexhelm/core';
import { runEntriesToRunSpecs } from './run-entries-to-run-specs.js';
import type { BigBenchTask } from './run-spec-function.js';

// 502 descriptions run through HELM 0.2.1's own code by scripts/helm-oracle.py (every run-spec function, expander,
// model family, data augmentation and error path): RunSpec names and a hash of each run_spec.json, or the error class.
interface OracleCase {
  description: string;
  names?: string[];
  sha256?: string[];
  error?: string;
}
const { cases } = JSON.parse(readFileSync(new URL('./fixtures/helm-oracle-cases.json', import.meta.url), 'utf8')) as { cases: OracleCase[] };

// The stand-ins helm-oracle.py gives HELM for the two downloads.
const TASKS: Record<string, BigBenchTask> = {
  mc: { metrics: ['multiple_choice_grade', 'exact_str_match'] },
  gen: { metrics: ['exact_str_match', 'bleu', 'rouge', 'unknown_metric'] },
  pref: { metrics: ['rouge'], task_prefix: 'Solve:\n', example_input_prefix: 'Q: ', example_output_prefix: '\nA: ', stop_string: '\n\n' },
  empty_stop: { metrics: ['bleu'], stop_string: '' },
};
const resources = {
  raftInstructions: (subset: unknown) => `Instructions for ${String(subset)}.`,
  bigBenchTask: (task: unknown) => {
    const found = TASKS[String(task)];
    if (!found) throw new Error(`no BIG-bench task ${String(task)} in this test's TASKS`);
    return found;
  },
};

// Cases HELM builds but whose scenario would fail (or, for MMLU, silently find no file): refused by flexhelm's check.
const REFUSED = [
  'babi_qa:task=-0',
  'babi_qa:task=0.1',
  'babi_qa:task=1.5e-7',
  'babi_qa:task=1e16',
  'babi_qa:task=1e3',
  'babi_qa:task=inf',
  'babi_qa:task=nan',
  'babi_qa:task=x/y',
  'blimp:phenomenon=x,method=multiple_choice_joint',
  'commonsense:dataset=5,method=multiple_choice_joint',
  'med_dialog:subset=x',
  'mmlu:subject=high school',
  'mmlu:subject=x',
  'mmlu:subject=x,method=multiple_choice_separate_original',
  'raft:subset=5',
  'the_pile:subset=x',
  'wikifact:k=2.9,subject=x',
];

const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

describe('agreement with HELM 0.2.1 (helm-oracle fixture)', () => {
  it('has the generated cases', () => expect(cases.length).toBe(502));

  const outcome = (description: string, checkScenarioArguments: boolean): { error: string } | { names: string[]; sha256: string[] } => {
    try {
      const runSpecs = runEntriesToRunSpecs([{ description, priority: 1 }], { maxEvalInstances: 1000, numTrainTrials: 3, resources, checkScenarioArguments });
      return { names: runSpecs.map((r) => r.name), sha256: runSpecs.map((r) => sha(helmJson(r))) };
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      return { error: err.pythonClass };
    }
  };

  // HELM checks scenario arguments only when the scenario runs, so the comparison turns flexhelm's early check off.
  it.each(cases.map((c) => [c.description, c] as const))('%j', (description, c) => {
    expect(outcome(description, false)).toEqual(c.error ? { error: c.error } : { names: c.names, sha256: c.sha256 });
  });

  // With the check on (the default), a description HELM builds either builds identically or is a ValueError because a
  // scenario argument is not one of HELM's values; HELM's own errors stay as they are.
  it('changes only descriptions whose scenario arguments HELM would reject later (or not at all)', () => {
    const refused: string[] = [];
    for (const c of cases) {
      const strict = outcome(c.description, true);
      if (c.error || ('names' in strict && strict.names.length > 0)) expect(strict).toEqual(outcome(c.description, false));
      else if ('error' in strict) {
        expect(strict.error).toBe('ValueError');
        refused.push(c.description.split(',model=')[0]!);
      }
    }
    expect([...new Set(refused)].sort()).toEqual(REFUSED);
  });
});
