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

const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

describe('agreement with HELM 0.2.1 (helm-oracle fixture)', () => {
  it('has the generated cases', () => expect(cases.length).toBe(502));

  it.each(cases.map((c) => [c.description, c] as const))('%j', (description, c) => {
    let outcome: { error: string } | { names: string[]; sha256: string[] };
    try {
      const runSpecs = runEntriesToRunSpecs([{ description, priority: 1 }], { maxEvalInstances: 1000, numTrainTrials: 3, resources });
      outcome = { names: runSpecs.map((r) => r.name), sha256: runSpecs.map((r) => sha(helmJson(r))) };
    } catch (err) {
      if (!(err instanceof HelmError)) throw err;
      outcome = { error: err.pythonClass };
    }
    expect(outcome).toEqual(c.error ? { error: c.error } : { names: c.names, sha256: c.sha256 });
  });
});
