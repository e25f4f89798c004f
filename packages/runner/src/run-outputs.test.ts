import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pyFloat } from '@flexhelm/python-compat';
import {
  adapterSpec,
  helmJson,
  instance,
  objectSpec,
  reference,
  request,
  requestResult,
  requestState,
  runSpec,
  scenarioStateToPy,
  metricName,
  type ScenarioState,
  type Stat,
} from '@flexhelm/core';
import { readRunOutputs, RUN_OUTPUT_FILES, runDirectory, writeRunOutputs, type RunOutputs } from './run-outputs.js';

const outDir = mkdtempSync(join(tmpdir(), 'flexhelm-run-outputs-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

// One question, two trials: small, but every file has floats, nested specs and per-instance stats.
function outputs(): RunOutputs {
  const model = 'together/opt-66b';
  const spec = adapterSpec({ method: 'generation', model, num_train_trials: 2, max_tokens: 3, temperature: pyFloat(0), max_train_instances: 0 });
  const question = instance({ input: { text: 'Capital of France?' }, references: [reference('Paris', ['correct'])], split: 'test', id: 'id0' });
  const state: ScenarioState = {
    adapter_spec: spec,
    request_states: [0, 1].map((trial) =>
      requestState({
        instance: question,
        train_trial_index: trial,
        request: request({ model, prompt: 'Capital of France?', temperature: pyFloat(0), max_tokens: 3, stop_sequences: ['\n'] }),
        result: requestResult({
          success: true,
          completions: [{ text: trial === 0 ? ' Paris' : ' Lyon', logprob: -0.5, tokens: [{ text: ' Paris', logprob: -0.5, top_logprobs: new Map([[' Paris', -0.5]]) }] }],
          cached: false,
          request_time: 0.25,
          request_datetime: 1700000000,
        }),
        num_train_instances: 0,
        prompt_truncated: false,
      }),
    ),
  };
  const rs = runSpec({
    name: 'capitals:model=together_opt-66b',
    scenario_spec: objectSpec('helm.benchmark.scenarios.simple_scenarios.Simple1Scenario', {}),
    adapter_spec: spec,
    metric_specs: [objectSpec('helm.benchmark.basic_metrics.BasicMetric', { names: ['exact_match'] })],
  });
  // exact_match over the two trials (1 then 0), with HELM's int/float types as stats.json shows them.
  const exact = (values: number[]): Stat => {
    const sum = values.reduce((a, b) => a + b, 0);
    const mean = sum / values.length;
    const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length;
    return { name: metricName('exact_match', { split: 'test' }), count: values.length, sum, sum_squared: sum, min: values.reduce((a, b) => Math.min(a, b)), max: values.reduce((a, b) => Math.max(a, b)), mean: pyFloat(mean), variance: pyFloat(variance), stddev: pyFloat(Math.sqrt(variance)) };
  };
  const stats = [exact([1, 0])];
  const perInstanceStats = [0, 1].map((trial) => ({ instance_id: 'id0', train_trial_index: trial, stats: [exact([1 - trial])] }));
  const scenario = { name: 'capitals', description: 'toy capitals', tags: ['question_answering'], output_path: 'benchmark_output/scenarios/capitals' };
  return { runSpec: rs, scenario, scenarioState: state, stats, perInstanceStats };
}

describe('HELM run outputs', () => {
  it('writes the five files as HELM renders them and reads them back unchanged', async () => {
    const o = outputs();
    const dir = runDirectory(outDir, 'v1', o.runSpec.name);
    // Off the event loop (issue 26: a server's job of many runs synced five files per run on it): a turn of the
    // loop scheduled before the write runs before the write is over.
    let turned = false;
    setImmediate(() => (turned = true));
    await writeRunOutputs(dir, o).then(() => expect(turned, 'the event loop turned while the files were written').toBe(true));
    expect(readdirSync(dir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
    const back = readRunOutputs(dir);
    const pairs: [string, unknown, unknown][] = [
      ['run_spec.json', o.runSpec, back.runSpec],
      ['scenario.json', o.scenario, back.scenario],
      ['scenario_state.json', scenarioStateToPy(o.scenarioState), scenarioStateToPy(back.scenarioState)],
      ['stats.json', o.stats, back.stats],
      ['per_instance_stats.json', o.perInstanceStats, back.perInstanceStats],
    ];
    for (const [file, original, reread] of pairs) {
      const text = readFileSync(join(dir, file), 'utf8');
      expect(text, file).toBe(helmJson(original as never));
      expect(helmJson(reread as never), file).toBe(text);
    }
    expect(readFileSync(join(dir, 'per_instance_stats.json'), 'utf8')).toContain('"variance": 0.0');
    expect(readFileSync(join(dir, 'stats.json'), 'utf8')).toContain('"mean": 0.5');
  });

  it('leaves the folder untouched when a value cannot be rendered', async () => {
    const o = outputs();
    const dir = join(outDir, 'broken');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(writeRunOutputs(dir, { ...o, scenario: { ...o.scenario, tags: [cyclic as never] } })).rejects.toThrow();
    expect(() => readdirSync(dir)).toThrow(/ENOENT/);
  });

  it('refuses suite and run names that would leave runs/<suite>/', () => {
    expect(() => runDirectory(outDir, '..', 'x')).toThrow(/invalid suite name/);
    expect(() => runDirectory(outDir, 'v1', '../x')).toThrow(/invalid run name/);
  });
});
