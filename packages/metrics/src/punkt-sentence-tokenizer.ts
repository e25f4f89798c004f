import { PY_DIGIT_CLASS, PY_WHITESPACE_CLASS, PY_WORD_CLASS, pyIsLowerChar, pyIsUpperChar, pyStrip } from '@flexhelm/python-compat';

/**
 * NLTK 3.8's `PunktSentenceTokenizer` with an untrained model (no abbreviations, collocations, sentence starters or
 * orthographic statistics) — the `sent_tokenize` that `word_tokenize` runs first. With no statistics, a token ending
 * in `.`, `?` or `!` breaks the sentence unless it is an ellipsis, an initial (`J.`) followed by a cased word, or a
 * number (`3.`) followed by a lower-case word or punctuation.
 */

const S = `[${PY_WHITESPACE_CLASS}]`;
const NS = `[^${S.slice(1)}`;
const NON_WORD = `(?:[)";}\\]*:@'({\\[?!])`;
const MULTI_CHAR = `(?:-{2,}|\\.{2,}|(?:\\.${S}){2,}\\.)`;
const WORD_START = `[^("\`{\\[:;&#*@)}\\]\\-,]`;
// Python's `$` also matches before a final newline; lines never hold one here, so plain end-of-input is enough.
const WORD_TOKENIZER = new RegExp(
  `${MULTI_CHAR}|(?=${WORD_START})${NS}+?(?=${S}|$|${NON_WORD}|${MULTI_CHAR}|,(?=$|${S}|${NON_WORD}|${MULTI_CHAR}))|${NS}`,
  'gu',
);
const PERIOD_CONTEXT = new RegExp(`[.?!](?=(${NON_WORD}|${S}+(${NS}+)))`, 'gu');
// Sticky, not `^`: with the multiline flag `^` would also match after any newline.
const BOUNDARY_REALIGNMENT = new RegExp(`["')\\]}]+?(?:${S}+|(?=--)|$)`, 'muy');
const RE_NUMERIC = new RegExp(`^-?[.,]?${PY_DIGIT_CLASS}[${PY_DIGIT_CLASS},.-]*\\.?$`, 'u');
const RE_INITIAL = new RegExp(`^(?!${PY_DIGIT_CLASS})[${PY_WORD_CLASS}]\\.$`, 'u');
const RE_ELLIPSIS = /^\.\.+$/;
const SENT_END_CHARS = ['.', '?', '!'];
const PUNCTUATION = new Set([';', ':', ',', '.', '!', '?']);
const STRING_WHITESPACE = new Set([' ', '\t', '\n', '\r', '\x0b', '\x0c']);

interface PunktToken {
  tok: string;
  type: string;
  periodFinal: boolean;
  sentbreak: boolean;
  abbr: boolean;
  ellipsis: boolean;
}

function makeToken(tok: string): PunktToken {
  const type = tok.toLowerCase().replace(RE_NUMERIC, '##number##');
  return { tok, type, periodFinal: tok.endsWith('.'), sentbreak: false, abbr: false, ellipsis: false };
}

function typeNoPeriod(t: PunktToken): string {
  return t.type.length > 1 && t.type.endsWith('.') ? t.type.slice(0, -1) : t.type;
}

function tokenizeWords(text: string): PunktToken[] {
  const out: PunktToken[] = [];
  for (const line of text.split('\n')) {
    if (pyStrip(line) === '') continue;
    for (const m of line.matchAll(WORD_TOKENIZER)) out.push(makeToken(m[0]));
  }
  return out;
}

/** `[^\W\d]\.$`: one word character that is not a digit (underscore included), then a period. */
function isInitial(tok: string): boolean {
  return RE_INITIAL.test(tok);
}

function firstPass(t: PunktToken): void {
  if (SENT_END_CHARS.includes(t.tok)) t.sentbreak = true;
  else if (RE_ELLIPSIS.test(t.tok)) t.ellipsis = true;
  // With no known abbreviations every other period-final token (but `x..`) is a break candidate.
  else if (t.periodFinal && !t.tok.endsWith('..')) t.sentbreak = true;
}

/** The orthographic heuristic with empty statistics: punctuation and lower-case words are no sentence starters. */
function orthoHeuristic(t: PunktToken): boolean | 'unknown' {
  if (PUNCTUATION.has(t.tok)) return false;
  if (pyIsLowerChar(t.tok[0]!)) return false;
  return 'unknown';
}

function secondPass(t1: PunktToken, t2: PunktToken | undefined): void {
  if (!t2 || !t1.periodFinal) return;
  const initial = isInitial(t1.tok);
  if (initial || typeNoPeriod(t1) === '##number##') {
    const starter = orthoHeuristic(t2);
    if (starter === false) {
      t1.sentbreak = false;
      t1.abbr = true;
      return;
    }
    if (starter === 'unknown' && initial && pyIsUpperChar(t2.tok[0]!)) {
      t1.sentbreak = false;
      t1.abbr = true;
    }
  }
}

function containsSentbreak(text: string): boolean {
  const tokens = tokenizeWords(text);
  tokens.forEach(firstPass);
  let found = false;
  for (let i = 0; i < tokens.length; i++) {
    secondPass(tokens[i]!, tokens[i + 1]);
    if (found) return true;
    if (tokens[i]!.sentbreak) found = true;
  }
  return false;
}

function lastWhitespaceIndex(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) if (STRING_WHITESPACE.has(text[i]!)) return i;
  return 0;
}

interface EndContext {
  end: number;
  nextTokStart: number | undefined;
  context: string;
}

function potentialEndContexts(text: string): EndContext[] {
  const out: EndContext[] = [];
  let prevStart = 0;
  let prevStop = 0;
  let prev: RegExpMatchArray | undefined;
  const emit = (m: RegExpMatchArray, start: number, stop: number) => {
    const afterTok = m[1]!; // group 1 always takes part in a PERIOD_CONTEXT match
    const nextTok = m[2];
    out.push({
      end: m.index! + 1,
      nextTokStart: nextTok !== undefined ? m.index! + 1 + afterTok.length - nextTok.length : undefined,
      context: text.slice(start, stop) + m[0] + afterTok,
    });
  };
  for (const m of text.matchAll(PERIOD_CONTEXT)) {
    const before = text.slice(prevStop, m.index);
    let afterSpace = lastWhitespaceIndex(before);
    afterSpace = afterSpace ? afterSpace + prevStop + 1 : prevStart;
    if (prev && prevStop <= afterSpace) emit(prev, prevStart, prevStop);
    prev = m;
    prevStart = afterSpace;
    prevStop = m.index!;
  }
  if (prev) emit(prev, prevStart, prevStop);
  return out;
}

/** `sent_tokenize(text)` with an untrained Punkt model (realigning closing quotes and brackets as NLTK does). */
export function sentTokenize(text: string): string[] {
  const slices: [number, number][] = [];
  let lastBreak = 0;
  for (const c of potentialEndContexts(text)) {
    if (containsSentbreak(c.context)) {
      slices.push([lastBreak, c.end]);
      lastBreak = c.nextTokStart ?? c.end;
    }
  }
  slices.push([lastBreak, text.replace(new RegExp(`${S}+$`, 'u'), '').length]);
  const out: string[] = [];
  let realign = 0;
  for (let i = 0; i < slices.length; i++) {
    const s1: [number, number] = [slices[i]![0] + realign, slices[i]![1]];
    const s2 = slices[i + 1];
    const sentence1 = text.slice(s1[0], s1[1]);
    if (!s2) {
      if (sentence1) out.push(sentence1);
      continue;
    }
    BOUNDARY_REALIGNMENT.lastIndex = 0;
    const m = BOUNDARY_REALIGNMENT.exec(text.slice(s2[0], s2[1]));
    if (m) {
      out.push(text.slice(s1[0], s2[0] + m[0].replace(new RegExp(`${S}+$`, 'u'), '').length));
      realign = m[0].length;
    } else {
      realign = 0;
      if (sentence1) out.push(sentence1);
    }
  }
  return out;
}
