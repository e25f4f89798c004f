/**
 * The characters Python 3 treats as whitespace in `str.isspace()`, `str.split()` and `re`'s `\s` for str patterns.
 * JavaScript's `\s` differs (it has U+FEFF but lacks U+001C–U+001F and U+0085), so patterns that must behave like
 * Python's spell the class out.
 */
export const PYTHON_WHITESPACE_CLASS = '\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

const PYTHON_SPACE = new RegExp(`^[${PYTHON_WHITESPACE_CLASS}]$`, 'u');

/** Python's `c.isspace()` for one character. */
export function isPythonSpace(c: string): boolean {
  return PYTHON_SPACE.test(c);
}
