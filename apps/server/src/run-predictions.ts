import { toNumber } from '@flexhelm/python-compat';
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { isCorrect, type Stat } from '@flexhelm/core';
import { readPerInstanceStats, readScenarioState } from '@flexhelm/runner';
import { ApiError } from './api-error.js';

/** One request of a finished run as the viewer shows it. */
export interface Prediction {
  instanceId: string;
  split: string;
  perturbation: string;
  trial: number;
  prompt: string;
  completion: string;
  references: { text: string; correct: boolean }[];
  /** From the per-instance headline stat (exact_match family); null when the run has none. */
  correct: boolean | null;
  /** The stat that decided `correct`, and every per-instance stat's mean by name. */
  correctnessMetric: string | null;
  stats: Record<string, number>;
}

const CORRECTNESS = ['exact_match', 'quasi_exact_match', 'prefix_exact_match', 'quasi_prefix_exact_match', 'math_equiv', 'equivalent'];

function statsKey(id: string, perturbation: string, trial: number): string {
  return `${id}\u0000${perturbation}\u0000${trial}`;
}

/**
 * A run folder's requests with their prompts, completions, references and per-instance correctness. `runDir` is
 * relative to `outputPath` as job records keep it (older records hold it absolute).
 */
export function runPredictions(outputPath: string, runDir: string): Prediction[] {
  const shown = runDir;
  runDir = isAbsolute(runDir) ? runDir : join(outputPath, runDir);
  if (!existsSync(`${runDir}/scenario_state.json`)) throw new ApiError(404, `${shown} has no scenario_state.json yet: the run has not finished`, 'invalid_request_error', 'run');
  const state = readScenarioState(runDir);
  // One instance can have several entries (one per metric family): merge them.
  const perInstance = new Map<string, Stat[]>();
  if (existsSync(`${runDir}/per_instance_stats.json`)) {
    for (const p of readPerInstanceStats(runDir)) {
      const key = statsKey(p.instance_id, p.perturbation?.name ?? '', p.train_trial_index);
      perInstance.set(key, [...(perInstance.get(key) ?? []), ...p.stats]);
    }
  }
  return state.request_states.map((rs) => {
    const perturbation = rs.instance.perturbation?.name ?? '';
    const stats: Record<string, number> = {};
    const per = perInstance.get(statsKey(rs.instance.id ?? '', perturbation, rs.train_trial_index));
    for (const s of per ?? []) if (s.mean !== undefined) stats[s.name.name] = toNumber(s.mean);
    const metric = CORRECTNESS.find((m) => m in stats) ?? null;
    return {
      instanceId: rs.instance.id ?? '',
      split: rs.instance.split ?? '',
      perturbation,
      trial: rs.train_trial_index,
      prompt: rs.request.prompt,
      completion: rs.result?.completions[0]?.text ?? '',
      references: rs.instance.references.map((r) => ({ text: r.output.text, correct: isCorrect(r) })),
      correct: metric === null ? null : (stats[metric] ?? 0) > 0,
      correctnessMetric: metric,
      stats,
    };
  });
}
