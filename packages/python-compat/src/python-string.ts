/**
 * Python 3 `str` methods and `re` character classes whose JavaScript look-alikes differ. Python's whitespace
 * (`str.isspace`, `split`, `strip`, `re`'s `\s`) includes U+001C–U+001F and U+0085 but not U+FEFF; `capitalize` and
 * `title` use title case, which JS lacks. JS `toLowerCase`/`toUpperCase` apply the same full Unicode mappings as
 * Python's `lower()`/`upper()` (final sigma included). Node's Unicode is newer than CPython 3.11's (14.0); characters
 * assigned since then may answer differently.
 */

/** The characters Python's `str.isspace()` accepts, as a RegExp character-class body. */
export const PY_WHITESPACE_CLASS = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
/** Python `re` `\w` for str patterns: `str.isalnum()` characters (letters and every `N*` number) and `_`. */
export const PY_WORD_CLASS = '\\p{L}\\p{N}_';
/** Python `re` `\d` for str patterns: decimal digits (category Nd). */
export const PY_DIGIT_CLASS = '\\p{Nd}';

const LEADING = new RegExp(`^[${PY_WHITESPACE_CLASS}]+`);
const TRAILING = new RegExp(`[${PY_WHITESPACE_CLASS}]+$`);
const RUNS = new RegExp(`[${PY_WHITESPACE_CLASS}]+`);

function charsPattern(chars: string): string {
  return [...chars].map((c) => `\\u{${c.codePointAt(0)!.toString(16)}}`).join('');
}

/** `s.strip()` or `s.strip(chars)`. */
export function pyStrip(s: string, chars?: string): string {
  return pyRstrip(pyLstrip(s, chars), chars);
}

/** `s.lstrip()` or `s.lstrip(chars)`. */
export function pyLstrip(s: string, chars?: string): string {
  if (chars === undefined) return s.replace(LEADING, '');
  if (chars === '') return s;
  return s.replace(new RegExp(`^[${charsPattern(chars)}]+`, 'u'), '');
}

/** `s.rstrip()` or `s.rstrip(chars)`. */
export function pyRstrip(s: string, chars?: string): string {
  if (chars === undefined) return s.replace(TRAILING, '');
  if (chars === '') return s;
  return s.replace(new RegExp(`[${charsPattern(chars)}]+$`, 'u'), '');
}

/** `s.split()`: runs of Python whitespace separate, no empty strings. */
export function pySplit(s: string): string[] {
  const stripped = pyStrip(s);
  return stripped === '' ? [] : stripped.split(RUNS);
}

// Characters whose title case (what `capitalize` gives the first character) is not their upper case. Ranges with a
// rule are handled in pyTitleCase; the rest are listed.
const TITLE_CASE: ReadonlyMap<number, string> = new Map([
  [0xdf, 'Ss'],
  [0x587, '\u0535\u0582'],
  [0x1fb2, '\u1fba\u0345'],
  [0x1fb3, '\u1fbc'],
  [0x1fb4, '\u0386\u0345'],
  [0x1fb7, '\u0391\u0342\u0345'],
  [0x1fbc, '\u1fbc'],
  [0x1fc2, '\u1fca\u0345'],
  [0x1fc3, '\u1fcc'],
  [0x1fc4, '\u0389\u0345'],
  [0x1fc7, '\u0397\u0342\u0345'],
  [0x1fcc, '\u1fcc'],
  [0x1ff2, '\u1ffa\u0345'],
  [0x1ff3, '\u1ffc'],
  [0x1ff4, '\u038f\u0345'],
  [0x1ff7, '\u03a9\u0342\u0345'],
  [0x1ffc, '\u1ffc'],
  [0xfb00, 'Ff'],
  [0xfb01, 'Fi'],
  [0xfb02, 'Fl'],
  [0xfb03, 'Ffi'],
  [0xfb04, 'Ffl'],
  [0xfb05, 'St'],
  [0xfb06, 'St'],
  [0xfb13, '\u0544\u0576'],
  [0xfb14, '\u0544\u0565'],
  [0xfb15, '\u0544\u056b'],
  [0xfb16, '\u054e\u0576'],
  [0xfb17, '\u0544\u056d'],
]);

/** Python's title case of one character. */
export function pyTitleCase(c: string): string {
  const cp = c.codePointAt(0)!;
  if (cp >= 0x1c4 && cp <= 0x1cc) return String.fromCodePoint(0x1c5 + 3 * Math.floor((cp - 0x1c4) / 3)); // DŽ Dž dž → Dž …
  if (cp >= 0x1f1 && cp <= 0x1f3) return '\u01f2';
  if ((cp >= 0x10d0 && cp <= 0x10fa) || (cp >= 0x10fd && cp <= 0x10ff)) return c; // Georgian: its own title case
  if (cp >= 0x1f80 && cp <= 0x1faf) return String.fromCodePoint(cp | 0x8); // Greek with ypogegrammeni
  return TITLE_CASE.get(cp) ?? c.toUpperCase();
}

/** `s.capitalize()` (Python ≥ 3.8): the first character title-cased, the rest lower-cased. */
export function pyCapitalize(s: string): string {
  if (s === '') return s;
  const first = String.fromCodePoint(s.codePointAt(0)!);
  // Lower-case the whole string before cutting off the first character, so a final sigma still sees what precedes it.
  return pyTitleCase(first) + s.toLowerCase().slice(first.toLowerCase().length);
}

const SPACE_CHAR = new RegExp(`^[${PY_WHITESPACE_CLASS}]$`);
const LOWERCASE_CHAR = /^\p{Lowercase}$/u;
const UPPERCASE_CHAR = /^\p{Uppercase}$/u;

/** `c.isspace()` for one character. */
export function pyIsSpaceChar(c: string): boolean {
  return SPACE_CHAR.test(c);
}

/**
 * `c.islower()` for one character (code point): CPython's LOWER flag is Unicode's Lowercase property, so `'ª'` and
 * `'ʰ'` (Other_Lowercase, no upper-case mapping) are lower case although case mapping leaves them unchanged.
 */
export function pyIsLowerChar(c: string): boolean {
  const cp = c.codePointAt(0)!;
  return cp === 0x295 || (LOWERCASE_CHAR.test(c) && !LOWERCASE_SINCE_UNICODE_14.has(cp));
}

// Node's ICU knows a newer Unicode than CPython 3.11 (14.0): these modifier letters became Other_Lowercase since,
// and ʕ (U+0295) stopped being Lowercase.
const LOWERCASE_SINCE_UNICODE_14: ReadonlySet<number> = new Set([0x10fc, 0xa7f2, 0xa7f3, 0xa7f4, 0xab69]);

/** `c.isupper()` for one character (code point): Unicode's Uppercase property (so `'Ⅷ'` yes, title-case `'ǅ'` no). */
export function pyIsUpperChar(c: string): boolean {
  return UPPERCASE_CHAR.test(c);
}

// Python's int() of a string: optional sign, decimal digits with single underscores between digits (unlike source
// literals, leading zeros are fine: int("010") == 10).
const PY_INT = /^[+-]?[0-9](?:_?[0-9])*$/;
// Python's float() literal: decimal with optional exponent (underscores between digits), or inf/infinity/nan.
const DIGITS = '[0-9](?:_?[0-9])*';
const PY_FLOAT = new RegExp(`^[+-]?(?:(?:${DIGITS}(?:\\.(?:${DIGITS})?)?|\\.${DIGITS})(?:[eE][+-]?${DIGITS})?|inf|infinity|nan)$`, 'i');

// Whitespace int()/float() strip around a number: str.isspace() characters except the \x1c-\x1f separators.
const NUMBER_SPACE = /[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
const DECIMAL_DIGIT = /\p{Nd}/u;

/**
 * The text int()/float() actually parse: any Unicode decimal digit (category Nd, e.g. "١" or "１") becomes its ASCII
 * digit and surrounding whitespace is dropped, as CPython does before parsing.
 */
function numberText(text: string): string {
  const chars = [...text].map((c) => {
    if (NUMBER_SPACE.test(c)) return ' ';
    if (c >= '0' && c <= '9') return c;
    if (!DECIMAL_DIGIT.test(c)) return c;
    // Nd digits come in runs of ten code points, 0 to 9; the run start is found by walking back.
    let start = c.codePointAt(0)!;
    while (DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start--;
    return String((c.codePointAt(0)! - start) % 10);
  });
  return chars.join('').replace(/^ +| +$/g, '');
}

/** `int(text)` as Python parses a str, or undefined where Python raises ValueError. */
export function pyParseInt(text: string): number | undefined {
  const s = numberText(text);
  if (!PY_INT.test(s)) return undefined;
  const n = Number(s.replace(/_/g, ''));
  return Object.is(n, -0) ? 0 : n;
}

/** {@link pyParseInt} with the exact value of an int of any size. */
export function pyParseBigInt(text: string): bigint | undefined {
  const s = numberText(text);
  return PY_INT.test(s) ? BigInt(s.replace(/_/g, '')) : undefined;
}

/** `float(text)` as Python parses a str, or undefined where Python raises ValueError. */
export function pyParseFloat(text: string): number | undefined {
  const s = numberText(text);
  if (!PY_FLOAT.test(s)) return undefined;
  const lower = s.toLowerCase();
  if (/^[+-]?nan$/.test(lower)) return NaN;
  if (/^[+-]?inf(inity)?$/.test(lower)) return lower.startsWith('-') ? -Infinity : Infinity;
  return Number(s.replace(/_/g, ''));
}
