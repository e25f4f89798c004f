import { describe, expect, it } from 'vitest';
import type { Instance } from '@flexhelm/core';
import { DyckLanguageScenario } from './dyck-language-scenario.js';
import { instanceDigest } from './test-instance-digest.js';

const cache = new Map<number, Instance[]>();
function generated(pairs: number): Instance[] {
  if (!cache.has(pairs)) cache.set(pairs, new DyckLanguageScenario(pairs).generate());
  return cache.get(pairs)!;
}

describe('DyckLanguageScenario', () => {
  it.each([
    [1, '969cea896841148cb21d18fd85b020715e538a2569798beff4ef89d9d2cd9943'],
    [2, '7cf8b3d445e065ec06bf1d6f87bc8e702ec53a46f5f9c850cd24d94ec8919f35'],
    [3, 'd28827b97e2f368904ed033e1e76e2b381f7dc6a242ccac547d9e60e6c43a146'],
    [4, '9149c9d8e6dd1e92a66ae39f73dac4f4ca7b363513f8e8e64329c570983ace11'],
  ])('num_parenthesis_pairs=%i reproduces HELM (3 train + 500 test)', (pairs, digest) => {
    const instances = generated(pairs);
    expect(instances.map((i) => i.split).filter((s) => s === 'train')).toHaveLength(3);
    expect(instances).toHaveLength(503);
    expect(instanceDigest(instances)).toBe(digest);
  });

  it('honours every constructor argument as HELM does', () => {
    const small = new DyckLanguageScenario(3, {
      numTrainInstances: 10,
      numTestInstances: 20,
      seed: 5,
      maxOutputSize: 2,
      minSeqTestLength: 20,
      maxSeqTestLength: 40,
      probP: 0.4,
      probQ: 0.3,
    }).generate();
    expect(instanceDigest(small)).toBe('3ac0a9538c90d588c336586300abcb2f539e5fde110d0a347283b6cb3c1912f6');
    const custom = new DyckLanguageScenario(2, { parenthesisPairs: [['a', 'b'], ['c', 'd']], numTestInstances: 50 }).generate();
    expect(instanceDigest(custom)).toBe('f2d04ad7e67c227b422af58770c120108977310df046fd92418d1eba719989b4');
  });

  it('produces prefixes whose reference closes them, with unique inputs and no train input in test', () => {
    expect(generated(2)[0]).toEqual({
      input: { text: '[ [ [ [ [ [ ] ] ] ]' },
      references: [{ output: { text: ' ] ]' }, tags: ['correct'] }],
      split: 'train',
      sub_split: undefined,
      id: undefined,
      perturbation: undefined,
      contrast_inputs: undefined,
      contrast_references: undefined,
    });
    const instances = generated(4);
    const inputs = instances.map((i) => i.input.text);
    expect(new Set(inputs).size).toBe(inputs.length);
    expect(instances.slice(0, 3).every((i) => i.split === 'train')).toBe(true);
    const closer: Record<string, string> = { '(': ')', '[': ']', '{': '}', '<': '>' };
    for (const inst of instances) {
      const stack: string[] = [];
      for (const s of inst.input.text.split(' ')) {
        if (s in closer) stack.push(closer[s]!);
        else expect(stack.pop()).toBe(s);
      }
      const output = inst.references[0]!.output.text;
      expect(output).toBe(` ${stack.reverse().join(' ')}`);
      expect(stack.length).toBeGreaterThanOrEqual(1);
      expect(stack.length).toBeLessThanOrEqual(3);
    }
  });

  it('rejects impossible settings with a message naming the argument', () => {
    expect(() => new DyckLanguageScenario(5)).toThrow(/between 1 and 4/);
    expect(() => new DyckLanguageScenario(0)).toThrow(/between 1 and 4/);
    expect(() => new DyckLanguageScenario(2, { probP: 0.8, probQ: 0.3 })).toThrow(/prob_p \+ prob_q < 1/);
    expect(() => new DyckLanguageScenario(2, { minSeqTestLength: 60, maxSeqTestLength: 50 })).toThrow(/min_seq_test_length=60 exceeds max_seq_test_length=50/);
    expect(() => new DyckLanguageScenario(2, { seed: -1 })).toThrow(/seed=-1/);
  });
});
