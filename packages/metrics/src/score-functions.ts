import { pyFloat, type PyNumber, pyParseInt, pySplit, pyStrip } from '@flexhelm/python-compat';
import { normalizeText } from './normalize-text.js';

/**
 * HELM 0.2.1's per-pair score functions (`basic_metrics.py`). Each returns what the Python function returns,
 * including its int/float type (exact_match gives the int 1 or 0; f1_score gives the int 0 when precision or recall
 * is 0), because that type shows in stats.json.
 */
export type ScoreFunction = (gold: string, pred: string) => PyNumber;

/** The prediction HELM passes may be None (a multiple-choice letter outside the output mapping). */
export type Prediction = string | null;

export function exactMatch(gold: string, pred: Prediction): PyNumber {
  if (!pred) return 0;
  return pyStrip(gold) === pyStrip(pred) ? 1 : 0;
}

export function quasiExactMatch(gold: string, pred: Prediction): PyNumber {
  if (!pred) return 0;
  return normalizeText(gold) === normalizeText(pred) ? 1 : 0;
}

export function prefixExactMatch(gold: string, pred: Prediction): PyNumber {
  if (!pred) return 0;
  return pyStrip(pred).startsWith(pyStrip(gold)) ? 1 : 0;
}

export function quasiPrefixExactMatch(gold: string, pred: Prediction): PyNumber {
  if (!pred) return 0;
  return normalizeText(pred).startsWith(normalizeText(gold)) ? 1 : 0;
}

/** Token-set F1 of the normalized texts, as nltk's `f_measure` computes it (alpha 0.5). */
export function f1Score(gold: string, pred: Prediction): PyNumber {
  const reference = new Set(pySplit(normalizeText(gold)));
  const test = new Set(pySplit(normalizeText(requireText(pred, 'f1_score'))));
  if (reference.size === 0 || test.size === 0) return pyFloat(0);
  let common = 0;
  for (const t of test) if (reference.has(t)) common++;
  const precision = common / test.size;
  const recall = common / reference.size;
  if (precision === 0 || recall === 0) return 0;
  return pyFloat(1 / (0.5 / precision + 0.5 / recall));
}

/** Exact match of the text after the last `indicator` (default a space). */
export function exactMatchIndicator(gold: string, pred: Prediction, indicator = ' '): PyNumber {
  const p = pyStrip(requireText(pred, 'exact_match_indicator').split(indicator).at(-1)!);
  const g = pyStrip(gold.split(indicator).at(-1)!);
  return exactMatch(g, p);
}

/** HELM's `extract_set_from_text`: "The dog is big and red." → {big, red}; "Nothing." → ∅. */
export function extractSetFromText(setStr: string, setStartStr = ' is ', setSeparator = ' and ', emptySetStr = 'Nothing.'): Set<string> {
  if (setStr === emptySetStr) return new Set();
  const s = setStr.replaceAll('.', '');
  return new Set(s.split(setStartStr).at(-1)!.split(setSeparator));
}

function goldPredSets(gold: string, pred: Prediction, fn: string): [Set<string>, Set<string>] {
  return [extractSetFromText(gold), extractSetFromText(requireText(pred, fn).split('\n')[0]!)];
}

function setsEqual(a: Set<string>, b: Set<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

function intersectionSize(a: Set<string>, b: Set<string>): number {
  let n = 0;
  for (const x of a) if (b.has(x)) n++;
  return n;
}

export function iouSetMatch(gold: string, pred: Prediction): PyNumber {
  const [g, p] = goldPredSets(gold, pred, 'iou_set_match');
  if (g.size === 0) return pyFloat(setsEqual(g, p) ? 1 : 0);
  const inter = intersectionSize(g, p);
  return pyFloat(inter / (g.size + p.size - inter));
}

export function f1SetMatch(gold: string, pred: Prediction): PyNumber {
  const [g, p] = goldPredSets(gold, pred, 'f1_set_match');
  if (g.size === 0) return pyFloat(setsEqual(g, p) ? 1 : 0);
  return pyFloat((2 * intersectionSize(g, p)) / (g.size + p.size));
}

export function exactSetMatch(gold: string, pred: Prediction): PyNumber {
  const [g, p] = goldPredSets(gold, pred, 'exact_set_match');
  return pyFloat(setsEqual(g, p) ? 1 : 0);
}

/** |int(gold) − int(pred)| ignoring commas; an unparsable side counts as the float 0.0. */
export function absoluteValueDifference(gold: string, pred: Prediction): PyNumber {
  const parse = (text: string): PyNumber => pyParseInt(text.replaceAll(',', '')) ?? pyFloat(0);
  const g = parse(gold);
  const p = parse(requireText(pred, 'absolute_value_difference'));
  const float = typeof g !== 'number' || typeof p !== 'number';
  const diff = Math.abs(Number(g) - Number(p));
  return float ? pyFloat(diff) : diff;
}

/**
 * HELM calls the score functions with `None` when a multiple-choice prediction is outside the output mapping; the
 * functions that do not test `if not pred` first then fail in Python with an AttributeError/TypeError.
 */
export function requireText(pred: Prediction, fn: string): string {
  if (pred === null) {
    throw new TypeError(`${fn}: the prediction is None (a multiple-choice answer outside the output mapping); HELM 0.2.1 fails here too — use exact_match-style metrics for multiple_choice_joint runs`);
  }
  return pred;
}
