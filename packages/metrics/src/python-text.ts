import { PY_WHITESPACE_CLASS, pyStrip } from '@flexhelm/core';

/**
 * Python `str`/`re` semantics JavaScript does not share, beyond core's strip/split helpers: what Python's
 * Unicode-aware regular expressions call a word character (`\w`) or a digit (`\d`), and one-character case tests.
 */

/** Characters Python's `str.isspace()` accepts, as a character-class body (core's definition). */
export const PY_WHITESPACE = PY_WHITESPACE_CLASS;
/** Python `re` `\w` for str patterns: letters, numbers (any `N*` category) and underscore. */
export const PY_WORD = '\\p{L}\\p{N}_';
/** Python `re` `\d` for str patterns: decimal digits. */
export const PY_DIGIT = '\\p{Nd}';

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
