import { describe, expect, it } from 'vitest';
import { instance, withInstanceIds, type Instance } from '@flexhelm/core';
import { getRunInstances } from './get-run-instances.js';

function make(splits: string[]): Instance[] {
  return withInstanceIds(splits.map((split, i) => instance({ input: { text: `q${i}` }, references: [], split })));
}

describe('getRunInstances', () => {
  it('selects eval instances by numpy seed(0) permutation, in permutation order (spec golden values)', () => {
    const instances = make(Array.from({ length: 10000 }, () => 'test'));
    const run = getRunInstances(instances, 10);
    expect(run.map((i) => i.id)).toEqual([9394, 898, 2398, 5906, 2343, 8225, 5506, 6451, 2670, 3497].map((i) => `id${i}`));
  });

  it('keeps every train instance first, in order, and counts valid and test as eval', () => {
    const instances = make(['train', 'valid', 'train', 'test', 'valid', 'test', 'train']);
    const run = getRunInstances(instances, 2);
    expect(run.slice(0, 3).map((i) => i.id)).toEqual(['id0', 'id2', 'id6']);
    expect(run).toHaveLength(5);
    const evalIds = run.slice(3).map((i) => i.id);
    expect(new Set(evalIds).size).toBe(2);
    for (const id of evalIds) expect(['id1', 'id3', 'id4', 'id5']).toContain(id);
  });

  it('returns all eval instances in scenario order when there is no cap or the cap is not exceeded', () => {
    const instances = make(['test', 'train', 'valid']);
    expect(getRunInstances(instances).map((i) => i.id)).toEqual(['id1', 'id0', 'id2']);
    expect(getRunInstances(instances, null).map((i) => i.id)).toEqual(['id1', 'id0', 'id2']);
    expect(getRunInstances(instances, 2).map((i) => i.id)).toEqual(['id1', 'id0', 'id2']);
  });

  it('drops instances without a known split and allows a cap of 0', () => {
    const instances = make(['test', 'other', 'test']);
    expect(getRunInstances(instances, 0)).toEqual([]);
    expect(getRunInstances(instances).map((i) => i.id)).toEqual(['id0', 'id2']);
  });

  it('rejects a negative or fractional cap', () => {
    const instances = make(['test', 'test']);
    expect(() => getRunInstances(instances, -1)).toThrow(/max_eval_instances=-1/);
    expect(() => getRunInstances(instances, 1.5)).toThrow(/non-negative integer/);
  });
});
