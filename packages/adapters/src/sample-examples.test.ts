import { adapterSpec, instance, type Instance } from '@flexhelm/core';
import { describe, expect, it } from 'vitest';
import { getAdapter } from './get-adapter.js';
import type { InContextLearningAdapter } from './in-context-learning-adapter.js';
import { compareCodePoints, sampleExamples } from './sample-examples.js';
import { labeled, openAiWindowService } from './test-support.js';

const ws = openAiWindowService();
const icl = (method: string, maxTrain: number) => getAdapter(adapterSpec({ method, model: 'openai/ada', max_train_instances: maxTrain }), ws) as InContextLearningAdapter;
const texts = (xs: Instance[]) => xs.map((x) => x.input.text);

describe('sample_examples (HELM test_multiple_choice_joint_adapter.py)', () => {
  const pool = [labeled('say no', 'no'), labeled('say yes1', 'yes'), labeled('say yes2', 'yes'), labeled('say yes3', 'yes'), labeled('say yes4', 'yes')];

  it('seed 0 picks the most common label first: say yes4, say no, say yes1, say yes3', () => {
    expect(texts(icl('multiple_choice_joint', 4).sampleExamples(pool, 0))).toEqual(['say yes4', 'say no', 'say yes1', 'say yes3']);
  });

  it('gives nothing without train instances and caps at the pool size', () => {
    expect(icl('multiple_choice_joint', 2).sampleExamples([], 0)).toEqual([]);
    expect(icl('multiple_choice_joint', 10).sampleExamples(pool.slice(0, 3), 0)).toHaveLength(3);
  });
});

describe('sample_examples (HELM test_generation_adapter.py)', () => {
  it('samples unlabeled instances', () => {
    const unlabeled = [1, 2, 3].map((i) => instance({ input: { text: `prompt${i}` }, references: [] }));
    expect(icl('generation', 1).sampleExamples(unlabeled, 0)).toHaveLength(1);
  });

  it('differs between seeds', () => {
    const pool = Array.from({ length: 9 }, (_, i) => labeled(`prompt${i + 1}`, `reference${i + 1}`));
    const a = icl('generation', 3).sampleExamples(pool, 0);
    const b = icl('generation', 3).sampleExamples(pool, 1);
    expect(a).toHaveLength(3);
    expect(texts(a)).not.toEqual(texts(b));
  });

  it('stress: most frequent label first, then the tied labels, then singletons; reproducible and distinct per seed', () => {
    const pool = [
      labeled('prompt3', 'reference3'), labeled('prompt3', 'reference3'),
      labeled('prompt1', 'reference1'), labeled('prompt1', 'reference1'), labeled('prompt1', 'reference1'),
      labeled('prompt2', 'reference2'), labeled('prompt2', 'reference2'),
      ...Array.from({ length: 96 }, (_, i) => labeled(`prompt${i + 4}`, `reference${i + 4}`)),
    ];
    const adapter = icl('generation', 5);
    const seen: Instance[][] = [];
    for (let seed = 0; seed < 10; seed++) {
      const picked = adapter.sampleExamples(pool, seed);
      expect(adapter.sampleExamples(pool, seed)).toEqual(picked);
      expect(picked).toHaveLength(5);
      expect(picked[0]!.input.text).toBe('prompt1');
      expect(['prompt2', 'prompt3']).toContain(picked[1]!.input.text);
      expect(['prompt2', 'prompt3']).toContain(picked[2]!.input.text);
      expect(['prompt1', 'prompt2', 'prompt3']).not.toContain(picked[3]!.input.text);
      expect(['prompt1', 'prompt2', 'prompt3']).not.toContain(picked[4]!.input.text);
      for (const other of seen) expect(picked).not.toEqual(other);
      seen.push(picked);
    }
  });
});

describe('sampleExamples edge cases', () => {
  it('stops at an empty-string label as HELM does, then samples unlabeled instances', () => {
    const pool = [labeled('a', ''), labeled('b', ''), instance({ input: { text: 'u1' }, references: [] }), instance({ input: { text: 'u2' }, references: [] })];
    expect(texts(sampleExamples(pool, 2, 0)).sort()).toEqual(['u1', 'u2']);
  });

  it('breaks where HELM 0.2.1 would loop forever (labeled instances used up, unlabeled left)', () => {
    const pool = [labeled('a', 'x'), instance({ input: { text: 'u1' }, references: [] }), instance({ input: { text: 'u2' }, references: [] })];
    const picked = sampleExamples(pool, 3, 0);
    expect(texts(picked).slice(0, 1)).toEqual(['a']);
    expect(texts(picked).slice(1).sort()).toEqual(['u1', 'u2']);
  });

  it('orders labels by code point as Python does', () => {
    expect(['\uff01', '\u{1f600}', 'a'].sort(compareCodePoints)).toEqual(['a', '\uff01', '\u{1f600}']);
  });
});
