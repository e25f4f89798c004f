import { characterEntities } from 'character-entities';
import { characterEntitiesLegacy } from 'character-entities-legacy';

/** Python's `html.entities.html5`: every name with `;`, plus the legacy names that also work without it. */
const HTML5 = new Map<string, string>();
for (const [name, value] of Object.entries(characterEntities)) HTML5.set(`${name};`, value);
for (const name of characterEntitiesLegacy) HTML5.set(name, characterEntities[name]!); // every legacy name is an HTML5 name

const CHARREF = /&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)/gu;
// What HTML5 makes of references to U+0080–U+009F: the windows-1252 character with that byte value (undefined bytes map to themselves).
const C1_REMAP =
  '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';

function isInvalidCodePoint(n: number): boolean {
  return (
    (n >= 0x1 && n <= 0x8) ||
    n === 0xb ||
    (n >= 0xe && n <= 0x1f) ||
    (n >= 0x7f && n <= 0x9f) ||
    (n >= 0xfdd0 && n <= 0xfdef) ||
    (n & 0xfffe) === 0xfffe // U+xFFFE and U+xFFFF in every plane
  );
}

function numericReference(digits: string, radix: 10 | 16): string {
  const trimmed = digits.replace(/;$/, '').replace(/^0+(?=.)/, '');
  // Anything longer than 8 significant digits is beyond U+10FFFF whatever its value.
  const n = trimmed.length > 8 ? Infinity : parseInt(trimmed, radix);
  if (n === 0x00) return '\ufffd';
  if (n === 0x0d) return '\r';
  if (n >= 0x80 && n <= 0x9f) return C1_REMAP[n - 0x80]!;
  if ((n >= 0xd800 && n <= 0xdfff) || n > 0x10ffff) return '\ufffd';
  if (isInvalidCodePoint(n)) return '';
  return String.fromCodePoint(n);
}

/**
 * Python's `html.unescape(s)` (HTML5 rules): numeric references with HTML5's replacements, named references from the
 * full HTML5 table, legacy names without `;` matched by longest prefix, anything else left as is.
 */
export function pyHtmlUnescape(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(CHARREF, (match, ref: string) => {
    if (ref[0] === '#') return ref[1] === 'x' || ref[1] === 'X' ? numericReference(ref.slice(2), 16) : numericReference(ref.slice(1), 10);
    const exact = HTML5.get(ref);
    if (exact !== undefined) return exact;
    const chars = [...ref];
    for (let x = chars.length - 1; x > 1; x--) {
      const value = HTML5.get(chars.slice(0, x).join(''));
      if (value !== undefined) return value + chars.slice(x).join('');
    }
    return match;
  });
}
