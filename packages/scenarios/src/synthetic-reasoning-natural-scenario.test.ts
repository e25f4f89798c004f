import { describe, expect, it } from 'vitest';
import type { Instance } from '@flexhelm/core';
import { SRNScenario, type SrnDifficulty } from './synthetic-reasoning-natural-scenario.js';
import { instanceDigest } from './test-instance-digest.js';

const cache = new Map<string, Instance[]>();
function generated(difficulty: SrnDifficulty, seed = 42): Instance[] {
  const key = `${difficulty}/${seed}`;
  if (!cache.has(key)) cache.set(key, new SRNScenario(difficulty, seed).generate());
  return cache.get(key)!;
}

const HELM_DIGESTS: [string, number, string][] = [
  ['easy', 42, 'f03a0d2e9af43d972c2faca6eedb4d92111d453401ae7a041e2f61fc658f1f2e'],
  ['medium', 42, 'e99a528d503f6d3b335ed48c5217666302cad2d3794aed398f0c69fd59c0ed94'],
  ['hard', 42, '3eac2a0ab927f1bfd69d4ede43ec1d6bfec761b35edba91d4eac840270b4ea1f'],
  ['hard', 3, '14defb7c650fa96d23f97ba13a92f3d51eb157a9d72e2c7fb59fef49af2e869d'],
];

describe('SRNScenario', () => {
  it.each(HELM_DIGESTS)('difficulty=%s random_seed=%i reproduces HELM instance for instance', (difficulty, seed, digest) => {
    const instances = generated(difficulty as SrnDifficulty, seed);
    expect(instances).toHaveLength(11000);
    expect(instanceDigest(instances)).toBe(digest);
  });

  it('renders easy #0 exactly', () => {
    const first = generated('easy')[0];
    expect(first!.input.text).toBe(
      'If a poppy is boring and red, then the poppy is big.\nIf a poppy is fast, then the poppy is weak.\n' +
        'If a poppy is smart or hot, then the poppy is good.\nIf a poppy is purple, then the poppy is bad.\n' +
        'If a poppy is beautiful and strong, then the poppy is soft.\nFact:\nThe poppy is beautiful and hot.\n' +
        'The following can be determined about the poppy:',
    );
    expect(first!.references).toEqual([{ output: { text: 'The poppy is good.' }, tags: ['correct'] }]);
  });

  it('keeps the bare "person" class word, "an animal", synonyms in hard facts and "Nothing."', () => {
    const medium = generated('medium');
    expect(medium[10999]!.input.text.startsWith('If person is smart, then person is scary.\nIf Carol is')).toBe(true);
    expect(medium[10999]!.references[0]!.output.text).toBe('Carol is boring.');
    const hard = generated('hard', 3);
    expect(hard[10999]!.input.text).toContain('If an animal is red or weak, then the animal is purple.');
    expect(hard[10999]!.input.text).toContain('Fact:\nThe squirrel is dull and purple.\n');
    expect(hard[10999]!.references[0]!.output.text).toBe('Nothing.');
  });

  it('refuses an unknown difficulty instead of silently treating it as medium', () => {
    expect(() => new SRNScenario('expert' as 'easy')).toThrow(/difficulty=easy, difficulty=medium or difficulty=hard/);
  });
});
