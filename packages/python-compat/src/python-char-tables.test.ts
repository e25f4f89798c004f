import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PY_DIGIT_CLASS, PY_WHITESPACE_CLASS, PY_WORD_CLASS, pyCapitalize, pyIsLowerChar, pyIsSpaceChar, pyIsUpperChar, pySplit, pyStrip, pyTitleCase } from './python-string.js';

// CPython 3.11's tables, written by scripts/python-char-tables.py (checked in so the comparison runs without Python;
// the first test proves the file still equals what the installed python3 prints).
const TABLE_FILE = fileURLToPath(new URL('./python-char-tables.json', import.meta.url));
const SCRIPT = fileURLToPath(new URL('../scripts/python-char-tables.py', import.meta.url));
type Ranges = [number, number][];
interface Tables {
  unidata_version: string;
  assigned: Ranges;
  isupper: Ranges;
  islower: Ranges;
  isspace: Ranges;
  isalpha: Ranges;
  isdecimal: Ranges;
  isdigit: Ranges;
  isalnum: Ranges;
  upper: Record<string, string>;
  lower: Record<string, string>;
  title: Record<string, string>;
  capitalize: Record<string, string>;
}
const tables = JSON.parse(readFileSync(TABLE_FILE, 'utf8')) as Tables;

function codePoints(ranges: Ranges): Set<number> {
  const out = new Set<number>();
  for (const [first, last] of ranges) for (let cp = first; cp <= last; cp++) out.add(cp);
  return out;
}

// Node's ICU knows a newer Unicode than CPython 3.11 (14.0): compare only code points both assign.
const UNASSIGNED_IN_NODE = /^\p{Cn}$/u;
const assigned = [...codePoints(tables.assigned)].filter((cp) => !UNASSIGNED_IN_NODE.test(String.fromCodePoint(cp)));

/** Code points where `actual` disagrees with CPython's class, as hex, for a readable failure. */
function disagreements(expected: Ranges, actual: (c: string) => boolean): string[] {
  const yes = codePoints(expected);
  return assigned.filter((cp) => actual(String.fromCodePoint(cp)) !== yes.has(cp)).map((cp) => cp.toString(16));
}

function mappingDisagreements(expected: Record<string, string>, actual: (c: string) => string): string[] {
  return assigned
    .filter((cp) => actual(String.fromCodePoint(cp)) !== (expected[cp] ?? String.fromCodePoint(cp)))
    .map((cp) => cp.toString(16));
}

const classTest = (body: string) => {
  const re = new RegExp(`^[${body}]$`, 'u');
  return (c: string) => re.test(c);
};

describe('character classes against CPython 3.11 over every assigned code point', () => {
  it('the checked-in tables are what python3 prints', () => {
    const run = spawnSync('python3', [SCRIPT], { encoding: 'utf8', maxBuffer: 16 << 20 });
    if (run.error) throw new Error(`python3 is needed to check python-char-tables.json (${run.error.message}); install python3 3.11`);
    const printed = JSON.parse(run.stdout) as Tables;
    // Another CPython minor version has another Unicode database; only 3.11's (14.0) is the reference.
    if (printed.unidata_version !== tables.unidata_version) return;
    expect(printed).toEqual(tables);
  });

  it('covers the BMP and the astral planes', () => {
    expect(tables.unidata_version).toBe('14.0.0');
    expect(assigned.length).toBeGreaterThan(140_000);
    expect(assigned.some((cp) => cp > 0xffff)).toBe(true);
  });

  it('islower and isupper (ª, ʰ and ⅷ are lower case, Ⅷ upper case, ǅ neither)', () => {
    expect(['ª', 'ʰ', 'ⅷ', 'ß', 'Ⅷ', 'ǅ'].map(pyIsLowerChar)).toEqual([true, true, true, true, false, false]);
    expect(['ª', 'Ⅷ', 'ǅ', '𝐀'].map(pyIsUpperChar)).toEqual([false, true, false, true]);
    expect(disagreements(tables.islower, pyIsLowerChar)).toEqual([]);
    expect(disagreements(tables.isupper, pyIsUpperChar)).toEqual([]);
  });

  it('isspace, and the whitespace strip and split use', () => {
    expect(disagreements(tables.isspace, pyIsSpaceChar)).toEqual([]);
    expect(disagreements(tables.isspace, classTest(PY_WHITESPACE_CLASS))).toEqual([]);
    expect(disagreements(tables.isspace, (c) => pyStrip(`a${c}`) === 'a' && pySplit(`a${c}b`).length === 2)).toEqual([]);
  });

  it("re's \\w is isalnum plus _, \\d is isdecimal, letters are isalpha", () => {
    expect(disagreements(tables.isalnum, (c) => c !== '_' && classTest(PY_WORD_CLASS)(c))).toEqual([]);
    expect(disagreements(tables.isdecimal, classTest(PY_DIGIT_CLASS))).toEqual([]);
    expect(disagreements(tables.isalpha, classTest('\\p{L}'))).toEqual([]);
  });

  it('upper, lower, title and capitalize mappings', () => {
    // JS upper/lower (which callers use directly) follow Node's Unicode: ƛ ɤ ꟓ ꟕ gained upper-case forms after 14.0.
    const newerInNode = ['19b', '264', 'a7d3', 'a7d5'];
    expect(mappingDisagreements(tables.upper, (c) => c.toUpperCase())).toEqual(newerInNode);
    expect(mappingDisagreements(tables.lower, (c) => c.toLowerCase())).toEqual([]);
    expect(mappingDisagreements(tables.title, pyTitleCase)).toEqual(newerInNode);
    expect(mappingDisagreements(tables.capitalize, pyCapitalize)).toEqual(newerInNode);
  });
});
