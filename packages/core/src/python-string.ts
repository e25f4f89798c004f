/**
 * Python `str` methods whose JavaScript look-alikes differ: Python's whitespace (`str.isspace`) includes
 * U+001C–U+001F and U+0085 but not U+FEFF, and `capitalize` title-cases the first character.
 */

/** The characters Python's `str.isspace()` accepts, as a RegExp character-class body. */
export const PY_WHITESPACE_CLASS = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

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
