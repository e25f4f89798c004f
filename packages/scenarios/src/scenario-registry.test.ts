import { PyFloat } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { HelmError, helmJson, objectSpec } from '@flexhelm/core';
import { createScenario, registeredScenarioClassNames } from './scenario-registry.js';
import { scenarioJson, scenarioOutputPath } from './scenario.js';
import { DyckLanguageScenario } from './dyck-language-scenario.js';
import { NumeracyScenario } from './numeracy-scenario.js';

const SR = 'helm.benchmark.scenarios.synthetic_reasoning_scenario.SyntheticReasoningScenario';

function errorOf(f: () => unknown): HelmError {
  try {
    f();
  } catch (err) {
    if (err instanceof HelmError) return err;
    throw err;
  }
  throw new Error('expected a HelmError');
}

describe('createScenario', () => {
  it('knows the procedural scenarios by their HELM class names', () => {
    expect(registeredScenarioClassNames()).toEqual(
      expect.arrayContaining([
        SR,
        'helm.benchmark.scenarios.synthetic_reasoning_natural_scenario.SRNScenario',
        'helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario',
        'helm.benchmark.scenarios.numeracy_scenario.NumeracyScenario',
      ]),
    );
  });

  it('builds a scenario from its run-spec args, applying HELM defaults', () => {
    const dyck = createScenario(objectSpec('helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario', { num_parenthesis_pairs: 2 }));
    expect(dyck).toBeInstanceOf(DyckLanguageScenario);
    expect((dyck as DyckLanguageScenario).closing).toEqual([')', ']']);
    expect((dyck as DyckLanguageScenario).seed).toBe(42);
    const numeracy = createScenario(
      objectSpec('helm.benchmark.scenarios.numeracy_scenario.NumeracyScenario', { seed: 0, relation_type: 'linear', mode: 'standard' }),
    ) as NumeracyScenario;
    expect([numeracy.seed, numeracy.overlap, numeracy.sortVals]).toEqual([0, true, false]);
    const fromMap = createScenario({ class_name: SR, args: new Map([['mode', 'induction']]) as never });
    expect(fromMap.name).toBe('synthetic_reasoning');
  });

  it('accepts a float argument given as a Python float or int', () => {
    const dyck = createScenario(
      objectSpec('helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario', { num_parenthesis_pairs: 1, prob_p: 0.4, prob_q: 0.3 }),
    ) as DyckLanguageScenario;
    expect([dyck.probP, dyck.probQ]).toEqual([0.4, 0.3]);
    // An integral Python float reaches the range check as a number (and fails it there, not as a type error).
    const err = errorOf(() =>
      createScenario(objectSpec('helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario', { num_parenthesis_pairs: 1, prob_q: new PyFloat(0) })),
    );
    expect(err.pythonClass).toBe('ValueError');
  });

  it('names an unknown class and lists the known ones', () => {
    const err = errorOf(() => createScenario(objectSpec('helm.benchmark.scenarios.foo_scenario.FooScenario')));
    expect(err.message).toMatch(/Unknown scenario class "helm.benchmark.scenarios.foo_scenario.FooScenario": known scenario classes: .*SyntheticReasoningScenario/);
    const short = errorOf(() => createScenario(objectSpec('SyntheticReasoningScenario', { mode: 'induction' })));
    expect(short.message).toContain(`did you mean ${SR}?`);
  });

  it('reports unknown, missing and mistyped arguments as TypeError, like Python keyword binding', () => {
    const unknown = errorOf(() => createScenario(objectSpec(SR, { mode: 'induction', seed: 1 })));
    expect(unknown.pythonClass).toBe('TypeError');
    expect(unknown.message).toBe("SyntheticReasoningScenario: unexpected argument(s) 'seed'. SyntheticReasoningScenario accepts: mode, random_seed; fix the scenario spec's args.");
    const missing = errorOf(() => createScenario(objectSpec(SR, {})));
    expect(missing.message).toContain("missing required argument 'mode'");
    const typed = errorOf(() => createScenario(objectSpec(SR, { mode: 'induction', random_seed: new PyFloat(42) })));
    expect(typed.message).toContain("argument 'random_seed' must be an int (got 42.0)");
  });

  it('passes value errors through with HELM’s exception class', () => {
    const err = errorOf(() => createScenario(objectSpec(SR, { mode: 'magic' })));
    expect(err.pythonClass).toBe('AssertionError');
    expect(errorOf(() => createScenario(objectSpec('helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario', { num_parenthesis_pairs: 9 }))).pythonClass).toBe('ValueError');
  });
});

describe('scenarioJson', () => {
  it('writes HELM’s scenario.json fields in order, with the GitHub definition path', () => {
    const scenario = createScenario(objectSpec(SR, { mode: 'pattern_match' }));
    const outputPath = scenarioOutputPath('benchmark_output', scenario.name);
    expect(outputPath).toBe('benchmark_output/scenarios/synthetic_reasoning');
    expect(helmJson(scenarioJson(scenario, outputPath))).toBe(
      [
        '{',
        '  "name": "synthetic_reasoning",',
        '  "description": "Synthetic reasoning benchmark",',
        '  "tags": [',
        '    "reasoning",',
        '    "language",',
        '    "pattern_matching"',
        '  ],',
        '  "output_path": "benchmark_output/scenarios/synthetic_reasoning",',
        '  "definition_path": "https://github.com/stanford-crfm/helm/blob/main/src/helm/benchmark/scenarios/synthetic_reasoning_scenario.py"',
        '}',
      ].join('\n'),
    );
  });

  it('can point definition_path at an installed HELM (FlexLLMGen setups) and keeps empty tags', () => {
    const numeracy = new NumeracyScenario({ seed: 0 });
    const json = scenarioJson(numeracy, 'data/run', '/usr/lib/python3/site-packages/');
    expect(json.definition_path).toBe('/usr/lib/python3/site-packages/helm/benchmark/scenarios/numeracy_scenario.py');
    expect(json.tags).toEqual([]);
    expect(json.output_path).toBe('data/run');
  });
});
