import { PyFloat } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { helmJson, metricName } from '@flexhelm/core';
import { addToStat, mergeStat, newStat, statBareStr, StatTable, statOf, statRepr, takeMean } from './stat.js';

describe('Stat arithmetic (HELM 0.2.1 statistic.py)', () => {
  it('adds ints, floats, bools and skips None (spec §11 example)', () => {
    const s = newStat(metricName('x'));
    for (const v of [1, 0, true, null]) addToStat(s, v);
    expect(helmJson(s)).toBe(
      '{\n  "name": {\n    "name": "x"\n  },\n  "count": 3,\n  "sum": 2,\n  "sum_squared": 2,\n  "min": 0,\n  "max": 1,\n  "mean": 0.6666666666666666,\n  "variance": 0.2222222222222222,\n  "stddev": 0.4714045207910317\n}',
    );
    const m = takeMean(s);
    expect(m.sum).toBe(0.6666666666666666);
    expect(m.sum_squared).toBe(0.4444444444444444);
    expect(helmJson([m.variance, m.stddev])).toBe('[\n  0.0,\n  0.0\n]');
  });

  it('clamps a slightly negative population variance to the int 0', () => {
    const s = newStat(metricName('c'));
    for (const v of [0.1, 0.1, 0.1]) addToStat(s, v);
    expect(s.variance).toBe(0);
    expect(s.stddev).toBeInstanceOf(PyFloat);
    expect(statBareStr(s)).toBe('min=0.1, mean=0.1, max=0.1, sum=0.3 (3)');
  });

  it('keeps the first of equal extremes, so min/max keep their int/float type', () => {
    const s = statOf(metricName('t'), 1);
    addToStat(s, new PyFloat(1));
    expect(helmJson([s.min, s.max])).toBe('[\n  1,\n  1\n]');
  });

  it('merges, including empty stats, and merge_stat keeps first-insertion order', () => {
    const a = statOf(metricName('m'), 1);
    addToStat(a, 2);
    mergeStat(a, statOf(metricName('m'), 10));
    expect([a.count, a.sum, a.sum_squared, a.min, a.max]).toEqual([3, 13, 105, 1, 10]);
    expect(a.variance).toBe(16.222222222222225);
    const empty = mergeStat(newStat(metricName('e')), newStat(metricName('e')));
    expect(helmJson(empty)).toBe('{\n  "name": {\n    "name": "e"\n  },\n  "count": 0,\n  "sum": 0,\n  "sum_squared": 0\n}');
    expect(takeMean(empty)).toBe(empty);

    const table = new StatTable();
    table.merge(statOf(metricName('x', { split: 'test' }), 1));
    table.merge(statOf(metricName('x', { split: 'valid' }), 5));
    table.merge(statOf(metricName('x', { split: 'test' }), 3));
    expect(table.values().map((s) => [s.name.split, s.count, s.sum])).toEqual([['test', 2, 4], ['valid', 1, 5]]);
  });

  it('prints like Python repr', () => {
    const s = statOf(metricName('negative'), -3.5);
    addToStat(s, -2.25);
    addToStat(s, -10);
    expect(statRepr(s)).toBe("MetricName(name='negative', split=None, sub_split=None, perturbation=None)[min=-10, mean=-5.25, max=-2.25, sum=-15.75 (3)]");
  });
});
