import { PY_DIGIT_CLASS, PY_WHITESPACE_CLASS, PY_WORD_CLASS, pySplit } from '@flexhelm/python-compat';
import { memoizeText } from './memo.js';
import { sentTokenize } from './punkt-sentence-tokenizer.js';

/**
 * NLTK 3.8's `word_tokenize(text)`: Punkt sentence split (untrained model, see {@link sentTokenize}) then the
 * improved Treebank tokenizer (`NLTKWordTokenizer`) on each sentence. The regular expressions are NLTK's, rewritten
 * for JavaScript where Python's semantics differ (Unicode `\w`/`\b`/`\d`/`\s`, and `$` before a final newline).
 */

const S = `[${PY_WHITESPACE_CLASS}]`;
const W = `[${PY_WORD_CLASS}]`;
const BEFORE_WORD = `(?<!${W})`;
const AFTER_WORD = `(?!${W})`;
// Python's `$` (no MULTILINE): the end, or just before a newline that ends the string.
const PY_END = '(?=\\n?$)';

type Substitution = [RegExp, string];

const STARTING_QUOTES: Substitution[] = [
  [/([«“‘„]|[`]+)/gu, ' $1 '],
  [/^"/u, '``'],
  [/(``)/gu, ' $1 '],
  [/([ ([{<])("|'{2})/gu, '$1 `` '],
  [new RegExp(`(')(?!re|ve|ll|m|t|s|d|n)(${W})${AFTER_WORD}`, 'giu'), '$1 $2'],
];

const ENDING_QUOTES: Substitution[] = [
  [/([»”’])/gu, ' $1 '],
  [/''/gu, " '' "],
  [/"/gu, " '' "],
  [/([^' ])('[sS]|'[mM]|'[dD]|') /gu, '$1 $2 '],
  [/([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) /gu, '$1 $2 '],
];

const PUNCTUATION: Substitution[] = [
  [new RegExp(`([^.])(\\.)([\\])}>"'»”’ ]*)${S}*$`, 'u'), '$1 $2 $3 '],
  [new RegExp(`([:,])([^${PY_DIGIT_CLASS}])`, 'gu'), ' $1 $2'],
  [new RegExp(`([:,])${PY_END}`, 'u'), ' $1 '],
  [/\.{2,}/gu, ' $& '],
  [/[;@#$%&]/gu, ' $& '],
  [new RegExp(`([^.])(\\.)([\\])}>"']*)${S}*$`, 'u'), '$1 $2$3 '],
  [/[?!]/gu, ' $& '],
  [/([^'])' /gu, "$1 ' "],
  [/[*]/gu, ' $& '],
];

const PARENS_BRACKETS: Substitution = [/[\][(){}<>]/gu, ' $& '];
const DOUBLE_DASHES: Substitution = [/--/gu, ' -- '];

const CONTRACTIONS: RegExp[] = [
  ...[
    ['can', 'not'],
    ['d', "'ye"],
    ['gim', 'me'],
    ['gon', 'na'],
    ['got', 'ta'],
    ['lem', 'me'],
    ['more', "'n"],
  ].map(([a, b]) => new RegExp(`${BEFORE_WORD}(${a})(${b})${AFTER_WORD}`, 'giu')),
  new RegExp(`${BEFORE_WORD}(wan)(na)(?=${S})`, 'giu'),
  new RegExp(` ('t)(is)${AFTER_WORD}`, 'giu'),
  new RegExp(` ('t)(was)${AFTER_WORD}`, 'giu'),
];

function applyAll(text: string, subs: Substitution[]): string {
  for (const [re, replacement] of subs) text = text.replace(re, replacement);
  return text;
}

/** `NLTKWordTokenizer().tokenize(sentence)`. */
export function treebankTokenize(sentence: string): string[] {
  let text = applyAll(sentence, STARTING_QUOTES);
  text = applyAll(text, PUNCTUATION);
  text = applyAll(text, [PARENS_BRACKETS, DOUBLE_DASHES]);
  text = ` ${text} `;
  text = applyAll(text, ENDING_QUOTES);
  for (const re of CONTRACTIONS) text = text.replace(re, ' $1 $2 ');
  return pySplit(text);
}

const cachedWordTokenize = memoizeText((text: string) => Object.freeze(sentTokenize(text).flatMap(treebankTokenize)));

/** `nltk.word_tokenize(text)` (a fresh array each call; results are cached). */
export function wordTokenize(text: string): string[] {
  return [...cachedWordTokenize(text)];
}

