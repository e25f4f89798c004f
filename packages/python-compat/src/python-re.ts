import { HelmError } from './helm-error.js';
import { PY_DIGIT_CLASS as DIGIT, PY_WHITESPACE_CLASS as SPACE, PY_WORD_CLASS as WORD } from './python-string.js';

// JavaScript's `\b` and `\w` are ASCII-only; Python's (str patterns) are Unicode-aware.
/** Python's `\b` for str patterns (Unicode word characters), as a JS `u`-flag fragment. */
export const PY_WORD_BOUNDARY = `(?:(?<=[${WORD}])(?![${WORD}])|(?<![${WORD}])(?=[${WORD}]))`;
const WORD_BOUNDARY = PY_WORD_BOUNDARY;
const NOT_WORD_BOUNDARY = `(?:(?<=[${WORD}])(?=[${WORD}])|(?<![${WORD}])(?![${WORD}]))`;
const SYNTAX_CHARS = new Set('^$\\.*+?()[]{}|/-');
const SIMPLE_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', f: '\f', v: '\v', a: '\x07' };

function literal(ch: string): string {
  return SYNTAX_CHARS.has(ch) ? `\\${ch}` : `\\u{${ch.codePointAt(0)!.toString(16)}}`;
}

/**
 * Translates a Python `re` pattern (str pattern, Python 3.11) into an equivalent JavaScript `u` RegExp: Unicode-aware
 * `\w \s \d \b`, `.` that only stops at `\n`, Python's `$` (end or before a final newline), named groups `(?P<n>…)`,
 * and leading inline flags `(?ims)`. Anything that cannot be translated exactly is refused with an explanation.
 */
export function pythonRegExp(pattern: string, extraFlags = 'g'): RegExp {
  let flags = '';
  let i = 0;
  const inline = /^\(\?([aiLmsux]+)\)/.exec(pattern);
  if (inline) {
    for (const f of inline[1]!) {
      if (f === 'i' || f === 'm' || f === 's') flags += f;
      else if (f !== 'u') throw new HelmError('ValueError', `regular expression ${JSON.stringify(pattern)}: inline flag (?${f}) is not supported; rewrite the pattern without it`);
    }
    i = inline[0].length;
  }
  const multiline = flags.includes('m');
  const dotAll = flags.includes('s');
  let out = '';
  let inClass = false;
  for (; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === '\\') {
      const next = pattern[++i];
      if (next === undefined) throw new HelmError('ValueError', `regular expression ${JSON.stringify(pattern)} ends with a lone backslash`);
      const classes: Record<string, [string, string]> = { w: [WORD, ''], s: [SPACE, ''], d: [DIGIT, ''], W: [WORD, '^'], S: [SPACE, '^'], D: [DIGIT, '^'] };
      if (classes[next]) {
        const [body, neg] = classes[next];
        if (inClass && neg) throw new HelmError('ValueError', `regular expression ${JSON.stringify(pattern)}: \\${next} inside a character class is not supported`);
        out += inClass ? body : `[${neg}${body}]`;
      } else if (next === 'b' && !inClass) out += WORD_BOUNDARY;
      else if (next === 'b') out += '\\x08';
      else if (next === 'B') out += NOT_WORD_BOUNDARY;
      else if (next === 'A') out += '(?<![\\s\\S])';
      else if (next === 'Z') out += '(?![\\s\\S])';
      else if (SIMPLE_ESCAPES[next] !== undefined) out += `\\u{${SIMPLE_ESCAPES[next].charCodeAt(0).toString(16)}}`;
      else if (next === 'x' || next === 'u' || next === 'U') {
        const len = { x: 2, u: 4, U: 8 }[next];
        const hex = pattern.slice(i + 1, i + 1 + len);
        if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(hex)) throw new HelmError('ValueError', `regular expression ${JSON.stringify(pattern)}: bad escape \\${next}${hex}`);
        out += `\\u{${parseInt(hex, 16).toString(16)}}`;
        i += len;
      } else if (/[0-9]/.test(next)) {
        out += `\\${next}`;
      } else if (/[A-Za-z]/.test(next)) {
        throw new HelmError('ValueError', `regular expression ${JSON.stringify(pattern)}: bad escape \\${next} (Python rejects it too)`);
      } else out += literal(next);
    } else if (inClass) {
      if (ch === ']') inClass = false;
      out += ch === '[' ? '\\[' : ch;
    } else if (ch === '[') {
      inClass = true;
      out += ch;
      if (pattern[i + 1] === '^') out += pattern[++i];
      if (pattern[i + 1] === ']') {
        out += '\\]';
        i++;
      }
    } else if (ch === '.') out += dotAll ? '[\\s\\S]' : '[^\\n]';
    else if (ch === '^') out += multiline ? '(?:(?<![\\s\\S])|(?<=\\n))' : '(?<![\\s\\S])';
    else if (ch === '$') out += multiline ? '(?=\\n|(?![\\s\\S]))' : '(?=\\n?(?![\\s\\S]))';
    else if (ch === '(' && pattern.startsWith('(?P<', i)) {
      out += '(?<';
      i += 3;
    } else if (ch === '(' && pattern.startsWith('(?P=', i)) {
      const close = pattern.indexOf(')', i);
      out += `\\k<${pattern.slice(i + 4, close)}>`;
      i = close;
    } else if (ch === '{' || ch === '}') {
      // Python treats a brace that is not a valid quantifier as a literal; JavaScript's `u` mode refuses it.
      const quantifier = ch === '{' && /^\{\d*(,\d*)?\}/.test(pattern.slice(i)) && !/^\{,?\}/.test(pattern.slice(i));
      if (quantifier) {
        const close = pattern.indexOf('}', i);
        const body = pattern.slice(i + 1, close);
        out += `{${body.startsWith(',') ? `0${body}` : body}}`;
        i = close;
      } else out += `\\${ch}`;
    } else out += ch;
  }
  try {
    return new RegExp(out, `${flags.replace(/[ms]/g, '')}${extraFlags}u`);
  } catch (err) {
    throw new HelmError('ValueError', `regular expression ${JSON.stringify(pattern)} cannot be used: ${(err as Error).message}`);
  }
}

/** Expands a Python `re.sub` replacement template (`\1`, `\g<name>`, `\n`, …) for one match; missing groups give "". */
function expandTemplate(template: string, match: RegExpExecArray): string {
  let out = '';
  for (let i = 0; i < template.length; i++) {
    const ch = template[i];
    if (ch !== '\\') {
      out += ch;
      continue;
    }
    const next = template[++i];
    if (next === undefined) throw new HelmError('ValueError', `replacement ${JSON.stringify(template)} ends with a lone backslash (Python: bad escape (end of pattern))`);
    if (next === 'g') {
      const m = /^<([^>]+)>/.exec(template.slice(i + 1));
      if (!m) throw new HelmError('ValueError', `replacement ${JSON.stringify(template)}: \\g must be followed by <name> or <number>`);
      const ref = m[1]!;
      const group = /^\d+$/.test(ref) ? match[Number(ref)] : match.groups?.[ref];
      if (group === undefined && !(/^\d+$/.test(ref) ? Number(ref) < match.length : ref in (match.groups ?? {}))) {
        throw new HelmError('ValueError', `replacement ${JSON.stringify(template)}: unknown group ${ref}`);
      }
      out += group ?? '';
      i += m[0].length;
    } else if (/[0-9]/.test(next)) {
      const octal = /^0[0-7]{0,2}|^[1-7][0-7]{2}/.exec(template.slice(i));
      if (octal && (octal[0].startsWith('0') || octal[0].length === 3)) {
        out += String.fromCharCode(parseInt(octal[0], 8));
        i += octal[0].length - 1;
      } else {
        const digits = /^\d{1,2}/.exec(template.slice(i))![0];
        const n = Number(digits);
        if (n >= match.length) throw new HelmError('ValueError', `replacement ${JSON.stringify(template)}: invalid group reference ${n}`);
        out += match[n] ?? '';
        i += digits.length - 1;
      }
    } else if (SIMPLE_ESCAPES[next] !== undefined) out += SIMPLE_ESCAPES[next];
    else if (next === 'b') out += '\b';
    else if (next === '\\') out += '\\';
    else if (/[A-Za-z]/.test(next)) throw new HelmError('ValueError', `replacement ${JSON.stringify(template)}: bad escape \\${next}`);
    else out += `\\${next}`;
  }
  return out;
}

/** Python's `re.sub(pattern, repl, text)` (all matches, Python 3.7+ empty-match rules). */
export function pyReSub(pattern: string, repl: string, text: string): string {
  const regex = pythonRegExp(pattern);
  return text.replace(regex, (...args: unknown[]) => {
    const hasGroups = typeof args[args.length - 1] === 'object' && args[args.length - 1] !== null;
    const groups = hasGroups ? (args[args.length - 1] as Record<string, string>) : undefined;
    const positional = args.slice(0, hasGroups ? -3 : -2) as (string | undefined)[];
    const match = Object.assign(positional, { index: 0, input: text, groups }) as unknown as RegExpExecArray;
    return expandTemplate(repl, match);
  });
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
