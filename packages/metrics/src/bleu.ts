import { fsum, glibcExp, glibcLog, pyFloat, type PyNumber } from '@flexhelm/python-compat';
import { wordTokenize } from './word-tokenize.js';

/** The smallest positive normal double: NLTK's `method0` smoothing stands it in for a zero n-gram precision. */
const FLOAT_MIN = 2.2250738585072014e-308;

interface Precision {
  numerator: number;
  denominator: number;
}

function ngramCounts(tokens: string[], n: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i + n <= tokens.length; i++) {
    const key = JSON.stringify(tokens.slice(i, i + n));
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

function modifiedPrecision(references: string[][], hypothesis: string[], n: number): Precision {
  const counts = ngramCounts(hypothesis, n);
  const maxCounts = new Map<string, number>();
  for (const reference of references) {
    const refCounts = ngramCounts(reference, n);
    for (const ngram of counts.keys()) maxCounts.set(ngram, Math.max(maxCounts.get(ngram) ?? 0, refCounts.get(ngram) ?? 0));
  }
  let numerator = 0;
  let total = 0;
  for (const [ngram, count] of counts) {
    numerator += Math.min(count, maxCounts.get(ngram) ?? 0);
    total += count;
  }
  return { numerator, denominator: Math.max(1, total) };
}

function closestRefLength(references: string[][], hypLen: number): number {
  let best = references[0]!.length;
  for (const ref of references) {
    const len = ref.length;
    const d = Math.abs(len - hypLen);
    const bestD = Math.abs(best - hypLen);
    if (d < bestD || (d === bestD && len < best)) best = len;
  }
  return best;
}

function brevityPenalty(closestRefLen: number, hypLen: number): number {
  if (hypLen > closestRefLen) return 1;
  if (hypLen === 0) return 0;
  return glibcExp(1 - closestRefLen / hypLen);
}

/**
 * NLTK 3.8's `sentence_bleu(references, hypothesis, weights)` with its default `method0` smoothing: a zero n-gram
 * precision becomes the smallest normal double (so BLEU-4 with no 4-gram match is tiny but positive), and no
 * unigram match at all returns the int 0.
 */
export function sentenceBleu(references: string[][], hypothesis: string[], weights: number[] = [0.25, 0.25, 0.25, 0.25]): PyNumber {
  if (references.length === 0) throw new RangeError('sentence_bleu needs at least one reference');
  const precisions: Precision[] = [];
  for (let n = 1; n <= weights.length; n++) precisions.push(modifiedPrecision(references, hypothesis, n));
  const bp = brevityPenalty(closestRefLength(references, hypothesis.length), hypothesis.length);
  if (precisions[0]!.numerator === 0) return 0;
  const smoothed = precisions.map((p) => (p.numerator !== 0 ? p.numerator / p.denominator : FLOAT_MIN));
  const terms = smoothed.flatMap((p, i) => (p > 0 ? [weights[i]! * glibcLog(p)] : []));
  return pyFloat(bp * glibcExp(fsum(terms)));
}

/** HELM's `bleu_1(gold, pred)`: unigram BLEU on NLTK word tokens. */
export function bleu1(gold: string, pred: string): PyNumber {
  return sentenceBleu([wordTokenize(gold)], wordTokenize(pred), [1, 0, 0, 0]);
}

/** HELM's `bleu_4(gold, pred)`: 4-gram precision only (weights 0,0,0,1). */
export function bleu4(gold: string, pred: string): PyNumber {
  return sentenceBleu([wordTokenize(gold)], wordTokenize(pred), [0, 0, 0, 1]);
}
