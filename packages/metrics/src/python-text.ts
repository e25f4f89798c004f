/**
 * Python `str` semantics that JavaScript does not share: what counts as whitespace for `split()`/`strip()`, and
 * what Python's Unicode-aware regular expressions call a word character (`\w`) or a digit (`\d`).
 */

/** Characters Python's `str.isspace()` accepts (and so `split()`/`strip()` use). */
export const PY_WHITESPACE = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
/** Python `re` `\w` for str patterns: letters, numbers (any `N*` category) and underscore. */
export const PY_WORD = '\\p{L}\\p{N}_';
/** Python `re` `\d` for str patterns: decimal digits. */
export const PY_DIGIT = '\\p{Nd}';

const WS_RUN = new RegExp(`[${PY_WHITESPACE}]+`, 'u');
const LEADING_WS = new RegExp(`^[${PY_WHITESPACE}]+`, 'u');
const TRAILING_WS = new RegExp(`[${PY_WHITESPACE}]+$`, 'u');

/** `s.split()` (no argument): runs of whitespace separate, empty strings dropped. */
export function pySplit(s: string): string[] {
  return s.split(WS_RUN).filter((part) => part !== '');
}

/** `s.strip()`. */
export function pyStrip(s: string): string {
  return s.replace(LEADING_WS, '').replace(TRAILING_WS, '');
}

export function pyLstrip(s: string): string {
  return s.replace(LEADING_WS, '');
}

export function pyRstrip(s: string): string {
  return s.replace(TRAILING_WS, '');
}

/** `s.split(sep)` with an explicit separator (JS `split` agrees, but an empty separator is a Python ValueError). */
export function pySplitOn(s: string, sep: string): string[] {
  if (sep === '') throw new RangeError('empty separator');
  return s.split(sep);
}

/** `ch.isupper()` for one character: cased and upper case. */
export function pyIsUpper(ch: string): boolean {
  return ch.toUpperCase() === ch && ch.toLowerCase() !== ch;
}

/** `ch.islower()` for one character. */
export function pyIsLower(ch: string): boolean {
  return ch.toLowerCase() === ch && ch.toUpperCase() !== ch;
}

/** Python's `int(text)` for a str: optional sign, digits with single `_` separators, surrounding whitespace. */
export function pyParseInt(text: string): number | undefined {
  const t = pyStrip(text);
  if (!/^[+-]?\d+(_\d+)*$/u.test(t)) return undefined;
  return Number(t.replaceAll('_', ''));
}
