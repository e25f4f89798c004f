import { pyJsonDumps, pyJsonParse, type PyJsonValue } from '@flexhelm/python-compat';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { helmJson, parseRunSpec, parseScenarioState } from '@flexhelm/core';
import { evaluateRunSpecMetrics } from './evaluate-run-spec-metrics.js';
import { WhitespaceWindowService } from './test-window-service.js';

const DATA = new URL('../test-data/helm-0.2.1/', import.meta.url);
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe.each(['gen', 'sep', 'lm'])('the %s run matches HELM 0.2.1 byte for byte', (run) => {
  const read = (file: string) => pyJsonParse(readFileSync(new URL(`${run}/${file}`, DATA), 'utf8'));
  const runSpec = parseRunSpec(read('run_spec.json'));
  const state = parseScenarioState(read('scenario_state.json'));
  const expected = read('expected.json') as Map<string, PyJsonValue>;
  const result = evaluateRunSpecMetrics(runSpec.metric_specs, state, { windowService: new WhitespaceWindowService() });
  const stats = result.stats.filter((s) => !s.name.name.startsWith('platt_'));

  it('stats.json (Platt scaling excluded)', () => {
    expect(stats).toHaveLength(expected.get('num_stats') as number);
    const text = helmJson(stats);
    if (expected.has('stats_without_platt')) expect(text).toBe(pyJsonDumps(expected.get('stats_without_platt')!, 2));
    expect(sha256(text)).toBe(expected.get('stats_without_platt_sha256'));
  });

  it('per_instance_stats.json', () => {
    expect(sha256(helmJson(result.perInstanceStats))).toBe(expected.get('per_instance_stats_sha256'));
  });
});
