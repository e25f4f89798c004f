import { PY_WHITESPACE_CLASS } from '@flexhelm/python-compat';

/**
 * Extractive-fragment statistics of Grusky et al. (2018) as summ_eval's `DataStatsMetric` computes them (the
 * `Fragments` greedy matching of newsroom): coverage, density and compression of a summary against its source.
 *
 * summ_eval tokenizes with spaCy's `en_core_web_sm`; flexhelm uses {@link approximateSpacyTokenize}, which splits
 * whitespace, surrounding punctuation and English clitics like spaCy's rule-based tokenizer but does not carry its
 * full exception tables, so values can differ from HELM's on unusual text.
 */

const WS = new RegExp(`[${PY_WHITESPACE_CLASS}]+`, 'u');
const PREFIX = /^[([{"'“‘«$£€#`]/u;
const SUFFIX = /([)\]}"'”’»,;:!?%]|\.{1,3}|…)$/u;
const CLITIC = /^(.+?)('s|'S|n't|N'T|'re|'RE|'ve|'VE|'ll|'LL|'d|'D|'m|'M|’s|’re|’ve|’ll|’d|’m|n’t)$/u;

/** Whitespace split, then prefixes, suffixes and clitics peeled off as separate tokens. */
export function approximateSpacyTokenize(text: string): string[] {
  const out: string[] = [];
  for (const chunk of text.split(WS)) {
    if (chunk === '') continue;
    let word = chunk;
    const prefixes: string[] = [];
    const suffixes: string[] = [];
    for (let m = PREFIX.exec(word); m && word.length > 1; m = PREFIX.exec(word)) {
      prefixes.push(m[0]);
      word = word.slice(m[0].length);
    }
    for (let m = SUFFIX.exec(word); m && word.length > m[0].length; m = SUFFIX.exec(word)) {
      // "U.S." and single-letter initials keep their period, as spaCy's exceptions do.
      if (m[0] === '.' && /^([A-Za-z]\.)+[A-Za-z]?$/u.test(word)) break;
      suffixes.unshift(m[0]);
      word = word.slice(0, word.length - m[0].length);
    }
    const clitic = CLITIC.exec(word);
    out.push(...prefixes, ...(clitic ? [clitic[1]!, clitic[2]!] : word ? [word] : []), ...suffixes);
  }
  return out;
}

interface FragmentMatch {
  length: number;
}

/** newsroom's greedy `Fragments._match`: longest shared runs of summary tokens found in the text, left to right. */
function extractiveFragments(summary: string[], text: string[]): FragmentMatch[] {
  const matches: FragmentMatch[] = [];
  let aStart = 0;
  while (aStart < summary.length) {
    let bestLength = 0;
    let bStart = 0;
    while (bStart < text.length) {
      if (summary[aStart] === text[bStart]) {
        let aEnd = aStart;
        let bEnd = bStart;
        while (aEnd < summary.length && bEnd < text.length && text[bEnd] === summary[aEnd]) {
          aEnd++;
          bEnd++;
        }
        const length = aEnd - aStart;
        if (length > bestLength) bestLength = length;
        bStart = bEnd;
      } else bStart++;
    }
    if (bestLength > 0) {
      matches.push({ length: bestLength });
      aStart += bestLength;
    } else aStart++;
  }
  return matches;
}

export interface DataStats {
  coverage: number;
  density: number;
  compression: number;
}

/** `DataStatsMetric().evaluate_example(summary, text)`'s coverage, density and compression (case-insensitive). */
export function dataStats(summary: string, text: string): DataStats {
  const s = approximateSpacyTokenize(summary);
  const t = approximateSpacyTokenize(text);
  const fragments = extractiveFragments(s.map((x) => x.toLowerCase()), t.map((x) => x.toLowerCase()));
  const covered = fragments.reduce((n, f) => n + f.length, 0);
  const squared = fragments.reduce((n, f) => n + f.length ** 2, 0);
  return {
    coverage: s.length === 0 ? 0 : covered / s.length,
    density: s.length === 0 ? 0 : squared / s.length,
    compression: s.length === 0 ? 0 : t.length / s.length,
  };
}
