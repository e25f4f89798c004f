import { formatPyNumber, glibcPow, pyAdd, pyFloat, pyMax, pyMin, pyMul, type PyNumber, pyRound3, pyTrueDiv, toNumber } from '@flexhelm/python-compat';
import type { MetricName, Stat } from '@flexhelm/core';
import { metricNameKey, metricNameRepr } from './metric-name-key.js';

/** A value HELM's `Stat.add` accepts: None is skipped, bools count as 1/0. */
export type StatValue = PyNumber | boolean | null | undefined;

/** `Stat(name)`: empty, with every field present in dataclass order so JSON keys come out in HELM's order. */
export function newStat(name: MetricName): Stat {
  return { name, count: 0, sum: 0, sum_squared: 0, min: undefined, max: undefined, mean: undefined, variance: undefined, stddev: undefined };
}

/** A field-for-field copy (HELM's `dataclasses.replace(stat)`). */
export function copyStat(stat: Stat, name: MetricName = stat.name): Stat {
  return { ...newStat(name), count: stat.count, sum: stat.sum, sum_squared: stat.sum_squared, min: stat.min, max: stat.max, mean: stat.mean, variance: stat.variance, stddev: stat.stddev };
}

const squares = new Map<number, number>();

/**
 * Python's `mean ** 2` for a float: glibc's `pow(mean, 2.0)`, which is not always `mean * mean` (about once in
 * 2000 it is one ulp off). Memoised, since the same means recur across per-instance, per-context and per-trial stats.
 */
function pySquare(x: number): number {
  let sq = squares.get(x);
  if (sq === undefined) {
    if (squares.size > 100_000) squares.clear();
    sq = glibcPow(x, 2);
    squares.set(x, sq);
  }
  return sq;
}

function updateMeanVarianceStddev(stat: Stat): void {
  stat.mean = stat.count ? pyTrueDiv(stat.sum, stat.count) : undefined;
  // HELM leaves `variance` untouched when there is no mean, then derives `stddev` from whatever it holds.
  if (stat.mean !== undefined) {
    const pvariance = toNumber(stat.sum_squared) / stat.count - pySquare(toNumber(stat.mean));
    // Cancellation can make the population variance slightly negative; HELM clamps it to the int 0.
    stat.variance = pvariance < 0 ? 0 : pyFloat(pvariance);
  }
  stat.stddev = stat.variance !== undefined ? pyFloat(Math.sqrt(toNumber(stat.variance))) : undefined;
}

/** `Stat.add(x)`: mutates and returns `stat`. */
export function addToStat(stat: Stat, value: StatValue): Stat {
  if (value === null || value === undefined) return stat;
  const x: PyNumber = typeof value === 'boolean' ? (value ? 1 : 0) : value;
  stat.sum = pyAdd(stat.sum, x);
  stat.sum_squared = pyAdd(stat.sum_squared, pyMul(x, x));
  stat.min = stat.min !== undefined ? pyMin(stat.min, x) : x;
  stat.max = stat.max !== undefined ? pyMax(stat.max, x) : x;
  stat.count += 1;
  updateMeanVarianceStddev(stat);
  return stat;
}

/** `Stat.merge(other)`: adds `other`'s sums and counts into `stat` (the other's name is ignored, as in HELM). */
export function mergeStat(stat: Stat, other: Stat): Stat {
  stat.sum = pyAdd(stat.sum, other.sum);
  stat.sum_squared = pyAdd(stat.sum_squared, other.sum_squared);
  if (other.min !== undefined) stat.min = stat.min !== undefined ? pyMin(stat.min, other.min) : other.min;
  if (other.max !== undefined) stat.max = stat.max !== undefined ? pyMax(stat.max, other.max) : other.max;
  stat.count += other.count;
  updateMeanVarianceStddev(stat);
  return stat;
}

/** `Stat.take_mean()`: a stat holding only the mean (the same object when empty, as HELM returns `self`). */
export function takeMean(stat: Stat): Stat {
  if (stat.count === 0) return stat;
  return addToStat(newStat(stat.name), stat.mean);
}

/** `Stat(name).add(x)` in one call. */
export function statOf(name: MetricName, value: StatValue): Stat {
  return addToStat(newStat(name), value);
}

/**
 * HELM's `Dict[MetricName, Stat]`: insertion-ordered, keyed by the metric name's value (dataclass equality),
 * which is what `merge_stat` and the aggregation loops rely on.
 */
export class StatTable {
  private readonly stats = new Map<string, Stat>();

  get(name: MetricName): Stat | undefined {
    return this.stats.get(metricNameKey(name));
  }

  set(stat: Stat): void {
    this.stats.set(metricNameKey(stat.name), stat);
  }

  /** `merge_stat(stats, stat)`: insert a copy if absent, else merge into the existing one. */
  merge(stat: Stat): void {
    const key = metricNameKey(stat.name);
    const existing = this.stats.get(key);
    if (existing) mergeStat(existing, stat);
    else this.stats.set(key, copyStat(stat));
  }

  values(): Stat[] {
    return [...this.stats.values()];
  }

  get size(): number {
    return this.stats.size;
  }
}

function processForDisplay(x: PyNumber): string {
  const v = toNumber(x);
  if (Number.isFinite(v) && Math.trunc(v) === v) return formatPyNumber(v + 0); // `+ 0` turns -0 into 0, as int(-0.0) does
  return formatPyNumber(pyFloat(pyRound3(v)));
}

/** `Stat.bare_str()`: `min=…, mean=…, max=…, sum=… (count)` or `(0)`. */
export function statBareStr(stat: Stat): string {
  if (stat.count <= 0) return '(0)';
  const p = (x: PyNumber | undefined) => processForDisplay(x ?? 0);
  return `min=${p(stat.min)}, mean=${p(stat.mean)}, max=${p(stat.max)}, sum=${p(stat.sum)} (${stat.count})`;
}

/** `repr(stat)`: `MetricName(...)[bare_str]`. */
export function statRepr(stat: Stat): string {
  return `${metricNameRepr(stat.name)}[${statBareStr(stat)}]`;
}
