import { npArgsort, npExp, npMean, npSearchsortedLeft, pyLog } from '@flexhelm/python-compat';

/**
 * The calibration measures HELM 0.2.1 takes from `uncertainty-calibration` 0.1.3 (`calibration` package):
 * ECE with equal-mass or equal-width bins (plug-in estimate, p=1), selective accuracy, and Platt scaling.
 */

/** `np.array_split(sorted, parts)`: the first `n % parts` parts get one element more. */
function arraySplit<T>(values: T[], parts: number): T[][] {
  const base = Math.floor(values.length / parts);
  const extra = values.length % parts;
  const out: T[][] = [];
  let start = 0;
  for (let i = 0; i < parts; i++) {
    const size = base + (i < extra ? 1 : 0);
    out.push(values.slice(start, start + size));
    start += size;
  }
  return out;
}

/** `get_equal_bins`: bin upper edges halfway between equal-mass groups of the sorted probabilities, ending at 1.0. */
export function equalMassBins(probs: number[], numBins: number): number[] {
  const sorted = [...probs].sort((a, b) => a - b);
  const parts = arraySplit(sorted, Math.min(numBins, sorted.length));
  const bins: number[] = [];
  for (let i = 0; i < parts.length - 1; i++) bins.push((parts[i]!.at(-1)! + parts[i + 1]![0]!) / 2.0);
  bins.push(1.0);
  return [...new Set(bins)].sort((a, b) => a - b);
}

/** `get_equal_prob_bins`: i/num_bins for i = 1..num_bins. */
export function equalWidthBins(numBins: number): number[] {
  return Array.from({ length: numBins }, (_, i) => ((i + 1) * 1.0) / numBins);
}

/** `plugin_ce(bin(data, bins), power=1)`: Σ_bins |bin|/n · |mean(p) − mean(label)|. */
function pluginCe(probs: number[], labels: number[], bins: number[]): number {
  const n = probs.length;
  const binIndex = probs.map((p) => npSearchsortedLeft(bins, p));
  const order = npArgsort(binIndex);
  // `fast_bin` splits the (bin-sorted) data at the first index of bins 1 … len(bins)-1; the last part takes the rest.
  const sortedBins = order.map((i) => binIndex[i]!);
  const cuts = Array.from({ length: bins.length - 1 }, (_, b) => npSearchsortedLeft(sortedBins, b + 1));
  const bounds = [0, ...cuts, n];
  let dot = 0;
  for (let b = 0; b + 1 < bounds.length; b++) {
    const members = order.slice(bounds[b], bounds[b + 1]);
    const weight = (members.length * 1.0) / n;
    const error = members.length === 0 ? 0.0 : Math.abs(npMean(members.map((i) => probs[i]!)) - npMean(members.map((i) => labels[i]!)));
    dot += weight * error;
  }
  return dot;
}

function checkInputs(probs: number[], labels: number[]): void {
  if (probs.length !== labels.length) throw new RangeError('labels and probs should have the same number of entries.');
  if (labels.some((l) => !Number.isInteger(l) || l < 0 || l > 1)) throw new RangeError('If probs is 1D, each label should be 0 or 1.');
  if (probs.some((p) => !(p >= 0 && p <= 1))) throw new RangeError('calibration needs probabilities in [0, 1]');
}

/** `cal.get_ece_em(probs, labels, num_bins)`: ECE with equal-mass bins. */
export function eceEqualMass(probs: number[], labels: number[], numBins = 15): number {
  checkInputs(probs, labels);
  return pluginCe(probs, labels, equalMassBins(probs, numBins));
}

/** `cal.get_ece(probs, labels, num_bins)`: ECE with equal-width bins. */
export function eceEqualWidth(probs: number[], labels: number[], numBins = 15): number {
  checkInputs(probs, labels);
  return pluginCe(probs, labels, equalWidthBins(numBins));
}

/** `cal.get_selective_stats`: area under the coverage–accuracy curve and accuracy on the 10% most confident. */
export function selectiveStats(probs: number[], correct: number[]): [number, number] {
  const order = npArgsort(probs.map((p) => -p));
  let running = 0;
  const accs = order.map((i, k) => {
    running += correct[i]!;
    return running / (k + 1);
  });
  return [npMean(accs), accs[Math.trunc(0.1 * accs.length)]!];
}

export interface PlattScaler {
  coef: number;
  intercept: number;
  calibrate(probs: number[]): number[];
}

const EPS = 1e-12;
const logit = (p: number) => {
  const x = Math.min(Math.max(p, EPS), 1 - EPS);
  return pyLog(x / (1 - x));
};

/**
 * `cal.get_platt_scaler`: logistic regression of the labels on logit(p) with C = 1e10 (practically unregularised).
 * sklearn stops lbfgs at a gradient tolerance of 1e-4; this solves the same problem with Newton's method to
 * convergence, so coefficients agree with sklearn's to about 1e-4, not bit for bit.
 */
export function plattScaler(probs: number[], labels: number[], C = 1e10): PlattScaler {
  const xs = probs.map(logit);
  let w = 0;
  let b = 0;
  for (let iter = 0; iter < 100; iter++) {
    let gw = w / C;
    let gb = 0;
    let hww = 1 / C;
    let hwb = 0;
    let hbb = 0;
    xs.forEach((x, i) => {
      const p = 1 / (1 + Math.exp(-(w * x + b)));
      const r = p - labels[i]!;
      gw += r * x;
      gb += r;
      const s = p * (1 - p);
      hww += s * x * x;
      hwb += s * x;
      hbb += s;
    });
    const det = hww * hbb - hwb * hwb;
    if (!(Math.abs(det) > 0)) break;
    const dw = (hbb * gw - hwb * gb) / det;
    const db = (hww * gb - hwb * gw) / det;
    w -= dw;
    b -= db;
    if (Math.abs(dw) < 1e-12 && Math.abs(db) < 1e-12) break;
  }
  return {
    coef: w,
    intercept: b,
    calibrate: (ps) => ps.map((p) => 1 / (1 + npExp(-(logit(p) * w + b)))),
  };
}
