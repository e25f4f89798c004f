/**
 * The pieces of Python 3 `str` and `re` semantics that HELM's perturbations depend on and JavaScript does not share.
 * (Case mappings: JS `toLowerCase`/`toUpperCase` already apply the same full Unicode mappings as Python's
 * `lower()`/`upper()`, final sigma included; title case is the one Python mapping JS lacks.)
 */

/** Python `re` `\w` for str patterns: `str.isalnum()` characters (letters and every `N*` number) and `_`. */
export const PY_WORD_CLASS = '\\p{L}\\p{N}_';

/** Python's `\b` for str patterns (Unicode word characters), as a JS `u`-flag fragment; JS's own `\b` is ASCII-only. */
export const PY_WORD_BOUNDARY = `(?:(?<=[${PY_WORD_CLASS}])(?![${PY_WORD_CLASS}])|(?<![${PY_WORD_CLASS}])(?=[${PY_WORD_CLASS}]))`;

/** Characters of Python's `str.isspace()` (used by `strip()`/`split()`); JS `trim()` has U+FEFF and lacks U+001C–U+001F, U+0085. */
const PY_WHITESPACE_CLASS = '\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const LEADING_SPACE = new RegExp(`^[${PY_WHITESPACE_CLASS}]+`, 'u');
const TRAILING_SPACE = new RegExp(`[${PY_WHITESPACE_CLASS}]+$`, 'u');

/** `s.strip()` with no argument. */
export function pyStrip(s: string): string {
  return s.replace(LEADING_SPACE, '').replace(TRAILING_SPACE, '');
}

const LOWERCASE_CHAR = /^\p{Lowercase}$/u;
const UPPERCASE_CHAR = /^\p{Uppercase}$/u;

/** `c.islower()` for one character (code point): it has Unicode's Lowercase property, as CPython's LOWER flag. */
export function pyIsLowerChar(c: string): boolean {
  return LOWERCASE_CHAR.test(c);
}

/** `c.isupper()` for one character (code point): it has Unicode's Uppercase property. */
export function pyIsUpperChar(c: string): boolean {
  return UPPERCASE_CHAR.test(c);
}

/**
 * Code points whose Python `title()` differs from `upper()` (Unicode 14, as CPython 3.11), besides the ranges
 * handled in {@link pyTitleChar}. Generated from `unicodedata`; not HELM data.
 */
const TITLE_EXCEPTIONS: ReadonlyMap<number, string> = new Map([
  [0x00df, 'Ss'], [0x0587, '\u0535\u0582'],
  [0x1fb2, '\u1fba\u0345'], [0x1fb3, '\u1fbc'], [0x1fb4, '\u0386\u0345'], [0x1fb7, '\u1fbc\u0342'], [0x1fbc, '\u1fbc'],
  [0x1fc2, '\u1fca\u0345'], [0x1fc3, '\u1fcc'], [0x1fc4, '\u0389\u0345'], [0x1fc7, '\u1fcc\u0342'], [0x1fcc, '\u1fcc'],
  [0x1ff2, '\u1ffa\u0345'], [0x1ff3, '\u1ffc'], [0x1ff4, '\u038f\u0345'], [0x1ff7, '\u1ffc\u0342'], [0x1ffc, '\u1ffc'],
  [0xfb00, 'Ff'], [0xfb01, 'Fi'], [0xfb02, 'Fl'], [0xfb03, 'Ffi'], [0xfb04, 'Ffl'], [0xfb05, 'St'], [0xfb06, 'St'],
  [0xfb13, '\u0544\u0576'], [0xfb14, '\u0544\u0565'], [0xfb15, '\u0544\u056b'], [0xfb16, '\u054e\u0576'], [0xfb17, '\u0544\u056d'],
]);

/** Python's title case of one code point (`c.title()`). */
export function pyTitleChar(c: string): string {
  const cp = c.codePointAt(0)!;
  // Latin digraphs DŽ/Dž/dž, LJ/Lj/lj, NJ/Nj/nj, DZ/Dz/dz: the title form is the middle one of each triple.
  if (cp >= 0x01c4 && cp <= 0x01cc) return String.fromCodePoint(0x01c5 + 3 * Math.floor((cp - 0x01c4) / 3));
  if (cp >= 0x01f1 && cp <= 0x01f3) return '\u01f2';
  // Georgian Mkhedruli letters upper-case to Mtavruli but are their own title case.
  if ((cp >= 0x10d0 && cp <= 0x10fa) || (cp >= 0x10fd && cp <= 0x10ff)) return c;
  // Greek letters with ypogegrammeni: title case is the prosgegrammeni capital (U+1F88… = U+1F80… + 8).
  if (cp >= 0x1f80 && cp <= 0x1faf) return String.fromCodePoint(cp | 0x8);
  return TITLE_EXCEPTIONS.get(cp) ?? c.toUpperCase();
}

/** `s.capitalize()` (Python 3.8+): the first character in title case, the rest lower-cased. */
export function pyCapitalize(s: string): string {
  if (s === '') return s;
  const first = String.fromCodePoint(s.codePointAt(0)!);
  // Lower-case the whole string and cut the first character's part, so a final sigma still sees its context.
  return pyTitleChar(first) + s.toLowerCase().slice(first.toLowerCase().length);
}

/** Escapes `s` so a JS `u`-flag RegExp matches it literally (what `re.escape` achieves in Python). */
export function escapeRegExp(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

/**
 * {@link escapeRegExp} for an `iu`-flag RegExp that must match like Python's `re.IGNORECASE`. The two agree on every
 * cased character except one group: Python also equates i, I, dotless ı and dotted İ (simple lower case of İ is i,
 * and sre lists ı as equivalent to i), which JS case folding keeps apart.
 */
export function escapeRegExpIgnoreCase(s: string): string {
  return escapeRegExp(s).replace(/[iIıİ]/g, '[iIıİ]');
}

/**
 * HELM's `match_case(source_word, target_word)`: `target` lower-cased if every character of `source` is lower
 * case, upper-cased if every one is upper case, capitalized if only the first is; otherwise unchanged. A character
 * that is neither (an apostrophe, a digit) makes both "every" tests fail, so `"I'm"` counts as capitalized.
 */
export function matchCase(source: string, target: string): string {
  const chars = Array.from(source);
  if (chars.every(pyIsLowerChar)) return target.toLowerCase();
  if (chars.every(pyIsUpperChar)) return target.toUpperCase();
  if (chars.length > 0 && pyIsUpperChar(chars[0]!)) return pyCapitalize(target);
  return target;
}
