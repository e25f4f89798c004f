import { HelmError } from '@flexhelm/core';

/** A value read from a HOCON document. */
export type HoconValue = string | number | boolean | null | HoconValue[] | HoconObject;
export interface HoconObject {
  [key: string]: HoconValue;
}

/** The 1-based line each object or array started on, for error messages about the parsed data. */
export const hoconLines = new WeakMap<object, number>();

/**
 * Parses the HOCON subset HELM's `run_specs*.conf` files use (pyhocon reads them in HELM): an optional root `{}`,
 * `#` and `//` comments, quoted or unquoted keys, `:` / `=` separators (or none before `{`), fields and array items
 * separated by commas or newlines, quoted ("..." and """...""") and unquoted strings, numbers, true/false/null,
 * nested objects and arrays. A repeated key replaces the earlier value (objects are merged, as HOCON does).
 * Substitutions (`${...}`), `include` and dotted key paths are rejected with a clear error.
 */
export function parseHocon(text: string, source = '<hocon>'): HoconObject {
  let i = 0;
  const lineAt = (pos: number) => text.slice(0, pos).split('\n').length;
  const fail = (what: string, pos = i): never => {
    throw new HelmError('ValueError', `${source}:${lineAt(pos)}: ${what}`);
  };

  // Skips spaces, tabs and comments; newlines too unless `stopAtNewline`. Returns whether a newline was crossed.
  const skip = (stopAtNewline = false): boolean => {
    let crossed = false;
    while (i < text.length) {
      const c = text[i];
      if (c === '\n') {
        if (stopAtNewline) return crossed;
        crossed = true;
        i++;
      } else if (c === ' ' || c === '\t' || c === '\r' || c === '\ufeff') i++;
      else if (c === '#' || (c === '/' && text[i + 1] === '/')) {
        while (i < text.length && text[i] !== '\n') i++;
      } else break;
    }
    return crossed;
  };

  const parseQuoted = (): string => {
    if (text.startsWith('"""', i)) {
      const end = text.indexOf('"""', i + 3);
      if (end < 0) fail('unterminated """ string');
      const value = text.slice(i + 3, end);
      i = end + 3;
      return value;
    }
    const start = i;
    i++;
    let out = '';
    while (i < text.length && text[i] !== '"') {
      const c = text[i];
      if (c === '\n') fail('unterminated string (a quoted string cannot span lines; close it with ")', start);
      if (c === '\\') {
        const e = text[i + 1];
        const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
        if (e !== undefined && e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
          i += 6;
        } else fail(`invalid escape \\${e ?? ''} in string`);
      } else {
        out += c;
        i++;
      }
    }
    if (i >= text.length) fail('unterminated string (missing closing ")', start);
    i++;
    return out;
  };

  const FORBIDDEN = '$"{}[]:=,+#`^?!@*&\\';
  const isUnquotedChar = (c: string | undefined) =>
    c !== undefined && !FORBIDDEN.includes(c) && !/\s/.test(c) && !(c === '/' && text[i + 1] === '/');

  const parseUnquoted = (): string => {
    const start = i;
    while (i < text.length && isUnquotedChar(text[i])) i++;
    if (i === start) fail(`unexpected ${JSON.stringify(text[i] ?? 'end of file')}`);
    return text.slice(start, i);
  };

  const parseKey = (): string => {
    const pos = i;
    const key = text[i] === '"' ? parseQuoted() : parseUnquoted();
    if (text[pos] !== '"' && key.includes('.')) fail(`dotted key paths are not supported (${key}); quote the key or nest objects`, pos);
    if (key === 'include' && text[pos] !== '"') fail('include is not supported; list the conf files separately', pos);
    return key;
  };

  const scalar = (raw: string): HoconValue => {
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    if (raw === 'null') return null;
    if (/^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/.test(raw)) return Number(raw);
    return raw;
  };

  // A value: object, array, or a concatenation of strings/unquoted tokens on one line ("a b" → "a b").
  const parseValue = (): HoconValue => {
    const c = text[i];
    if (c === '{') return parseObject(true);
    if (c === '[') return parseArray();
    // biome-ignore lint/suspicious/noTemplateCurlyInString: HOCON's substitution syntax, quoted in the message
    if (c === '$') fail('substitutions (${...}) are not supported');
    const parts: { text: string; quoted: boolean }[] = [];
    while (i < text.length) {
      if (text[i] === '"') parts.push({ text: parseQuoted(), quoted: true });
      else if (isUnquotedChar(text[i])) parts.push({ text: parseUnquoted(), quoted: false });
      else break;
      const ws = i;
      while (text[i] === ' ' || text[i] === '\t') i++;
      if (!(text[i] === '"' || isUnquotedChar(text[i]))) {
        i = ws;
        break;
      }
      parts.push({ text: text.slice(ws, i), quoted: true });
    }
    if (parts.length === 0) fail(`expected a value but found ${JSON.stringify(text[i] ?? 'end of file')}`);
    const only = parts.length === 1 ? parts[0]! : undefined;
    if (only && !only.quoted) return scalar(only.text);
    return parts.map((p) => p.text).join('');
  };

  const merge = (target: HoconObject, key: string, value: HoconValue) => {
    const old = target[key];
    if (isObject(old) && isObject(value)) for (const [k, v] of Object.entries(value)) merge(old, k, v);
    else target[key] = value;
  };

  // Fields until '}' (braced) or end of text (root without braces).
  const parseObject = (braced: boolean): HoconObject => {
    const start = i;
    const obj: HoconObject = Object.create(null);
    hoconLines.set(obj, lineAt(start));
    if (braced) i++;
    for (;;) {
      skip();
      if (braced && text[i] === '}') {
        i++;
        return obj;
      }
      if (i >= text.length) {
        if (braced) fail('missing } to close the object opened here', start);
        return obj;
      }
      const key = parseKey();
      skip(true);
      if (text[i] === ':' || text[i] === '=') {
        i++;
        skip(true);
      } else if (text[i] !== '{') fail(`expected ':' or '=' after key ${JSON.stringify(key)}`);
      if (i >= text.length || text[i] === '\n') fail(`missing value for key ${JSON.stringify(key)}`);
      merge(obj, key, parseValue());
      const newline = skip();
      if (text[i] === ',') i++;
      else if (!newline && !(braced && text[i] === '}') && i < text.length) fail(`expected ',' or a newline after the value of ${JSON.stringify(key)}`);
    }
  };

  const parseArray = (): HoconValue[] => {
    const start = i;
    const items: HoconValue[] = [];
    hoconLines.set(items, lineAt(start));
    i++;
    for (;;) {
      skip();
      if (text[i] === ']') {
        i++;
        return items;
      }
      if (i >= text.length) fail('missing ] to close the array opened here', start);
      items.push(parseValue());
      const newline = skip();
      if (text[i] === ',') i++;
      else if (!newline && text[i] !== ']') fail("expected ',' or a newline between array items");
    }
  };

  skip();
  const root = text[i] === '{' ? parseObject(true) : parseObject(false);
  skip();
  if (i < text.length) fail(`unexpected ${JSON.stringify(text[i])} after the end of the document`);
  return root;
}

function isObject(v: HoconValue | undefined): v is HoconObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
