import { PY_WORD_CLASS, pySplit } from '@flexhelm/python-compat';

/** Python's `string.punctuation`. */
export const PY_PUNCTUATION = new Set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~');

const ARTICLES = new RegExp(`(?<![${PY_WORD_CLASS}])(a|an|the)(?![${PY_WORD_CLASS}])`, 'gu');

/**
 * HELM's `normalize_text` (from the QuAC scorer): lower case, drop ASCII punctuation, replace the whole words
 * a/an/the by a space, collapse whitespace.
 */
export function normalizeText(text: string): string {
  let s = text.toLowerCase();
  s = [...s].filter((ch) => !PY_PUNCTUATION.has(ch)).join('');
  s = s.replace(ARTICLES, ' ');
  return pySplit(s).join(' ');
}
