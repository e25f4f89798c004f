import { toNumber } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { instance, objectSpec, request, requestResult, requestState } from '@flexhelm/core';
import { BiasMetric } from './bias-metric.js';
import { parseBiasWordLists } from './bias-word-lists.js';
import { evaluateRunSpecMetrics } from './evaluate-run-spec-metrics.js';

// Small lists in the layout of HELM's bias_word_lists.py (the real lists are HELM's data and are not copied here).
const SOURCE = `"""Bias words."""
from typing import Dict, List

FEMALE_WORDS: List[str] = [
    "she",
    "her",
    "woman",
    "girl",
]

MALE_WORDS: List[str] = [
    "he", "him", "man", "boy", "his",
]

GENDER_TO_WORD_LISTS: Dict[str, List[str]] = {
    "female": FEMALE_WORDS,
    "male": MALE_WORDS,
}

ASIAN_NAMES: List[str] = [
    "wei",
    "li",
]

HISPANIC_NAMES: List[str] = [
    "maria", "jose", "juan",
]

WHITE_NAMES: List[str] = [
    "john", "mary", "anna", "paul",
]

RACE_TO_NAME_LISTS: Dict[str, List[str]] = {
    "asian": ASIAN_NAMES,
    "hispanic": HISPANIC_NAMES,
    "white": WHITE_NAMES,
}

ADJECTIVE_LIST: List[str] = [
    "smart", "lazy", "kind",
]

PROFESSION_LIST: List[str] = [
    "doctor", "nurse", "engineer", "teacher",
]
`;

const TEXTS = [
  'He is a smart doctor and she is a kind nurse.',
  'John and Mary met Wei. Li is a lazy engineer!',
  'The man said his boy is smart.',
  'Maria, Jose and Juan are teachers; Anna is a teacher.',
  'Nothing relevant here.',
];

// Printed by HELM 0.2.1's bias_metrics.py (nltk 3.8) on the same lists and texts.
const EXPECTED: [string, string, string | undefined, number][] = [
  ['representation', 'gender', undefined, 0.26190476190476186],
  ['representation', 'race', undefined, 0.060606060606060635],
  ['associations', 'gender', 'adjective', 0.15873015873015872],
  ['associations', 'race', 'profession', 0.4],
  ['associations', 'gender', 'profession', 0.05555555555555555],
];

describe('BiasMetric', () => {
  const lists = parseBiasWordLists(SOURCE);

  it('parses the word-list module', () => {
    expect([...lists.race.keys()]).toEqual(['asian', 'hispanic', 'white']);
    expect(lists.gender.get('male')).toEqual(['he', 'him', 'man', 'boy', 'his']);
    expect(lists.professions).toHaveLength(4);
    expect(() => parseBiasWordLists('x = 1')).toThrow(/is it HELM v0.2.1/);
  });

  it('matches HELM on representation and association scores', () => {
    for (const [mode, dem, target, expected] of EXPECTED) {
      const m = new BiasMetric(mode, dem, target, lists);
      const score = mode === 'representation' ? m.evaluateRepresentation(TEXTS) : m.evaluateAssociations(TEXTS);
      expect(score, `${mode} ${dem} ${target}`).toBe(expected);
    }
    expect(new BiasMetric('representation', 'race', undefined, lists).evaluateRepresentation(['no names'])).toBeUndefined();
  });

  it('runs from a run spec, per context, and reports itself not computed without word lists', () => {
    const states = TEXTS.map((text, i) =>
      requestState({
        instance: instance({ input: { text: 'Q' }, references: [], split: 'test', id: `id${i}` }),
        train_trial_index: 0,
        request: request({ model: 'together/opt-66b' }),
        result: requestResult({ success: true, completions: [{ text, logprob: -1, tokens: [] }], request_time: 1 }),
        num_train_instances: 0,
        prompt_truncated: false,
      }),
    );
    const state = { adapter_spec: { ...states[0]!.request, method: 'generation', num_train_trials: 1 } as never, request_states: states };
    const spec = objectSpec('helm.benchmark.bias_metrics.BiasMetric', { mode: 'associations', demographic_category: 'race', target_category: 'profession' });
    const result = evaluateRunSpecMetrics([spec], state, { biasWordLists: lists });
    const stat = result.stats.find((s) => s.name.name.startsWith('bias_metric:'))!;
    expect(stat.name).toEqual({ name: 'bias_metric:mode=associations,demographic_category=race,target_category=profession', split: 'test', sub_split: undefined, perturbation: undefined });
    expect(toNumber(stat.mean!)).toBe(0.4);
    expect(evaluateRunSpecMetrics([spec], state).notComputed[0]!.reason).toMatch(/bias word lists/);
  });
});
