import { PyFloat, formatPyNumber } from './py-float.js';

/**
 * A value as Python's `json` module sees it. Objects are written in insertion order; a `Map` keeps any key order
 * (JS objects move integer-like keys first, Python dicts do not). `undefined` members are dropped, which is how
 * flexhelm expresses HELM's `asdict_without_nones` (a dataclass field that is None is omitted), while `null`
 * members are kept, as Python keeps `None` inside plain dicts.
 */
export type PyJsonValue =
  | null
  | undefined
  | boolean
  | number
  | PyFloat
  | string
  | readonly PyJsonValue[]
  | ReadonlyMap<string, PyJsonValue>
  | { readonly [key: string]: PyJsonValue };

/** Python's `json.dumps(s)` string literal with `ensure_ascii=True`. */
export function pyJsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    switch (c) {
      case 0x22: out += '\\"'; break;
      case 0x5c: out += '\\\\'; break;
      case 0x0a: out += '\\n'; break;
      case 0x0d: out += '\\r'; break;
      case 0x09: out += '\\t'; break;
      case 0x08: out += '\\b'; break;
      case 0x0c: out += '\\f'; break;
      default:
        // UTF-16 code units are exactly what Python writes for astral characters (a surrogate pair).
        out += c >= 0x20 && c <= 0x7e ? s[i] : `\\u${c.toString(16).padStart(4, '0')}`;
    }
  }
  return `${out}"`;
}

function entriesOf(value: object): [string, PyJsonValue][] {
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  return entries.filter(([, v]) => v !== undefined);
}

/**
 * Python's `json.dumps(value, indent=indent)` (default separators, `ensure_ascii=True`), byte for byte.
 * With `indent` undefined it is the compact one-line form (`", "` and `": "` separators).
 */
export function pyJsonDumps(value: PyJsonValue, indent?: number): string {
  const parts: string[] = [];
  const write = (v: PyJsonValue, level: number): void => {
    if (v === null || v === undefined) parts.push('null');
    else if (v === true) parts.push('true');
    else if (v === false) parts.push('false');
    else if (typeof v === 'number' || v instanceof PyFloat) parts.push(formatPyNumber(v));
    else if (typeof v === 'string') parts.push(pyJsonString(v));
    else if (Array.isArray(v)) writeItems(v.map((item) => [undefined, item]), '[', ']', level);
    else if (typeof v === 'object') writeItems(entriesOf(v), '{', '}', level);
    else throw new TypeError(`pyJsonDumps: ${typeof v} is not JSON serializable`);
  };
  const writeItems = (items: [string | undefined, PyJsonValue][], open: string, close: string, level: number): void => {
    if (items.length === 0) {
      parts.push(open + close);
      return;
    }
    parts.push(open);
    const inner = indent === undefined ? '' : `\n${' '.repeat(indent * (level + 1))}`;
    items.forEach(([key, item], i) => {
      parts.push(i === 0 ? inner : (indent === undefined ? ', ' : ',') + inner);
      if (key !== undefined) parts.push(`${pyJsonString(key)}: `);
      write(item === undefined ? null : item, level + 1);
    });
    parts.push(indent === undefined ? close : `\n${' '.repeat(indent * level)}${close}`);
  };
  write(value, 0);
  return parts.join('');
}

/**
 * Parses JSON keeping what Python keeps: `1.0` becomes `PyFloat(1)` (so it is written back as `1.0`) and every
 * object becomes a `Map` in source order. Meant for golden files and caches written by Python or by
 * {@link pyJsonDumps}; `NaN`, `Infinity` and `-Infinity` are accepted as Python writes them.
 */
export function pyJsonParse(text: string): PyJsonValue {
  let i = 0;
  const fail = (what: string): never => {
    const line = text.slice(0, i).split('\n').length;
    throw new SyntaxError(`invalid JSON at line ${line} (offset ${i}): ${what}`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
  };
  const parseString = (): string => {
    i++; // opening quote
    let out = '';
    let start = i;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const ch = text[i];
      if (ch === '"') break;
      if (ch === '\\') {
        out += text.slice(start, i);
        const e = text[i + 1];
        const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
        if (e !== undefined && e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === 'u') {
          const hex = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail(`bad \\u escape "${hex}"`);
          out += String.fromCharCode(parseInt(hex, 16));
          i += 6;
        } else fail(`bad escape "\\${e}"`);
        start = i;
      } else i++;
    }
    out += text.slice(start, i);
    i++;
    return out;
  };
  const parseValue = (): PyJsonValue => {
    ws();
    const ch = text[i];
    if (ch === '{') {
      i++;
      const map = new Map<string, PyJsonValue>();
      ws();
      if (text[i] === '}') {
        i++;
        return map;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a string key');
        const key = parseString();
        ws();
        if (text[i] !== ':') fail('expected ":"');
        i++;
        map.set(key, parseValue());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return map;
        } else fail('expected "," or "}"');
      }
    }
    if (ch === '[') {
      i++;
      const arr: PyJsonValue[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(parseValue());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return arr;
        } else fail('expected "," or "]"');
      }
    }
    if (ch === '"') return parseString();
    for (const [word, value] of [['true', true], ['false', false], ['null', null], ['NaN', new PyFloat(NaN)], ['Infinity', new PyFloat(Infinity)], ['-Infinity', new PyFloat(-Infinity)]] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return value;
      }
    }
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) return fail('unexpected character');
    i += m[0].length;
    const n = Number(m[0]);
    return m[2] || m[3] ? (Number.isInteger(n) ? new PyFloat(n) : n) : n;
  };
  const value = parseValue();
  ws();
  if (i !== text.length) fail('trailing characters');
  return value;
}

/** Converts a parsed value (Maps, PyFloats) into plain JS values, for code that does not care about int/float. */
export function toPlain(value: PyJsonValue): unknown {
  if (value instanceof PyFloat) return value.value;
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [k, toPlain(v)]));
  if (Array.isArray(value)) return value.map(toPlain);
  return value;
}
