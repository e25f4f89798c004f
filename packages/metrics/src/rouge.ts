import { PY_WHITESPACE_CLASS, pyFloat, type PyNumber } from '@flexhelm/python-compat';
import { memoizeText } from './memo.js';
import { porterStem } from './porter-stemmer.js';

/** The rouge types HELM uses (`rouge1`, `rouge2`, `rougeL`) and any other `rougeN`. */
export type RougeType = 'rougeL' | `rouge${number}`;

const NON_ALPHANUMERIC = /[^a-z0-9]+/g;
const SPACES = new RegExp(`[${PY_WHITESPACE_CLASS}]+`, 'u');
const VALID_TOKEN = /^[a-z0-9]+$/;

/**
 * rouge-score 0.1.2's default tokenizer: lower case, every run of characters outside [a-z0-9] becomes a space,
 * split on whitespace, Porter-stem tokens longer than three characters, keep only [a-z0-9]+ tokens.
 */
export function rougeTokenize(text: string, useStemmer = true): string[] {
  return [...(useStemmer ? stemmedTokens(text) : plainTokens(text))];
}

const stemmedTokens = memoizeText((text: string) => Object.freeze(tokenizeUncached(text, true)));
const plainTokens = memoizeText((text: string) => Object.freeze(tokenizeUncached(text, false)));

function tokenizeUncached(text: string, useStemmer: boolean): string[] {
  const replaced = text.toLowerCase().replace(NON_ALPHANUMERIC, ' ');
  let tokens = replaced.split(SPACES);
  if (useStemmer) tokens = tokens.map((t) => (t.length > 3 ? porterStem(t) : t));
  return tokens.filter((t) => VALID_TOKEN.test(t));
}

/** rouge-score's `Score(precision, recall, fmeasure)`; the all-empty case is the int 0 as in Python. */
export interface RougeScore {
  precision: PyNumber;
  recall: PyNumber;
  fmeasure: PyNumber;
}

function fmeasure(precision: number, recall: number): PyNumber {
  return precision + recall > 0 ? pyFloat((2 * precision * recall) / (precision + recall)) : pyFloat(0);
}

function lcsLength(ref: string[], can: string[]): number {
  let prev = new Array<number>(can.length + 1).fill(0);
  for (let i = 1; i <= ref.length; i++) {
    const row = new Array<number>(can.length + 1).fill(0);
    for (let j = 1; j <= can.length; j++) {
      row[j] = ref[i - 1] === can[j - 1] ? prev[j - 1]! + 1 : Math.max(prev[j]!, row[j - 1]!);
    }
    prev = row;
  }
  return prev[can.length]!;
}

function scoreLcs(target: string[], prediction: string[]): RougeScore {
  if (target.length === 0 || prediction.length === 0) return { precision: 0, recall: 0, fmeasure: 0 };
  const lcs = lcsLength(target, prediction);
  const precision = lcs / prediction.length;
  const recall = lcs / target.length;
  return { precision: pyFloat(precision), recall: pyFloat(recall), fmeasure: fmeasure(precision, recall) };
}

function ngramCounts(tokens: string[], n: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i + n <= tokens.length; i++) {
    // \u0000 cannot occur inside a token ([a-z0-9]+), so joining keeps n-grams distinct.
    const key = tokens.slice(i, i + n).join('\u0000');
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

function scoreNgrams(target: Map<string, number>, prediction: Map<string, number>): RougeScore {
  let intersection = 0;
  for (const [ngram, count] of target) intersection += Math.min(count, prediction.get(ngram) ?? 0);
  const targetCount = [...target.values()].reduce((a, b) => a + b, 0);
  const predictionCount = [...prediction.values()].reduce((a, b) => a + b, 0);
  const precision = intersection / Math.max(predictionCount, 1);
  const recall = intersection / Math.max(targetCount, 1);
  return { precision: pyFloat(precision), recall: pyFloat(recall), fmeasure: fmeasure(precision, recall) };
}

/** `RougeScorer([type], use_stemmer=True).score(target, prediction)[type]`. */
export function rougeScore(target: string, prediction: string, rougeType: RougeType, useStemmer = true): RougeScore {
  const targetTokens = rougeTokenize(target, useStemmer);
  const predictionTokens = rougeTokenize(prediction, useStemmer);
  if (rougeType === 'rougeL') return scoreLcs(targetTokens, predictionTokens);
  const m = /^rouge([0-9])$/.exec(rougeType);
  if (!m) throw new RangeError(`invalid rouge type "${rougeType}": use rougeL or rouge1 … rouge9`);
  const n = Number(m[1]);
  if (n <= 0) throw new RangeError(`rougen requires positive n: ${rougeType}`);
  return scoreNgrams(ngramCounts(targetTokens, n), ngramCounts(predictionTokens, n));
}

/** HELM's `get_rouge_function(type)`: the F-measure. */
export function rougeFunction(rougeType: RougeType): (gold: string, pred: string) => PyNumber {
  return (gold, pred) => rougeScore(gold, pred, rougeType).fmeasure;
}
