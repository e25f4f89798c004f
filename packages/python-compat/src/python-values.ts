import { HelmError, type PythonErrorClass } from './helm-error.js';
import { PyFloat, formatPyFloat, formatPyInt, } from './py-float.js';
import type { PyJsonValue as ArgValue } from './python-json.js';
import { pyParseInt } from './python-string.js';

/**
 * Python semantics the run-spec functions rely on, applied to description values (int, float, str; see
 * `parseObjectSpec`). HELM passes those values through untyped, so `str()`, `int()` and truthiness leak into names.
 */

/** Exception classes HELM raises here that core's `PythonErrorClass` does not list yet. */
type ExtraErrorClass = 'AttributeError' | 'OverflowError';

/** A HelmError with any Python exception class HELM raises while building run specs. */
export function pyError(pythonClass: PythonErrorClass | ExtraErrorClass, message: string): HelmError {
  return new HelmError(pythonClass as PythonErrorClass, message);
}

/** Python's type name of a value, for messages that mimic Python's. */
export function pyTypeName(value: ArgValue): string {
  if (value === null || value === undefined) return 'NoneType';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'str';
  if (value instanceof PyFloat) return 'float';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (Array.isArray(value)) return 'list';
  return 'dict';
}

function floatStr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  return formatPyFloat(x);
}

/** Python's `str(value)` (as an f-string shows it). */
export function pyStr(value: ArgValue): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'string') return value;
  if (value instanceof PyFloat) return floatStr(value.value);
  if (typeof value === 'number') return Number.isInteger(value) ? formatPyInt(value) : floatStr(value);
  return pyRepr(value);
}

// Characters `str.isprintable()` rejects (categories C* and Z* other than the space), which repr() escapes.
const NON_PRINTABLE = /^[\p{C}\p{Z}]$/u;

/** Python's `repr(s)` for a str: quotes chosen as Python does, non-printable characters escaped. */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === ' ' || !NON_PRINTABLE.test(ch)) out += ch;
    else if (c < 0x100) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c < 0x10000) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += `\\U${c.toString(16).padStart(8, '0')}`;
  }
  return out + quote;
}

/** Python's `repr(value)` for the scalar and container values descriptions and specs carry. */
export function pyRepr(value: ArgValue): string {
  if (typeof value === 'string') return pyStrRepr(value);
  if (Array.isArray(value)) return `[${value.map((v) => pyRepr(v)).join(', ')}]`;
  if (value instanceof Map) return `{${[...value.entries()].map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(', ')}}`;
  if (value !== null && typeof value === 'object' && !(value instanceof PyFloat)) {
    return `{${Object.entries(value).map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(', ')}}`;
  }
  return pyStr(value);
}

/** `repr(value)` cut to a readable length for messages: a hostile value may be a megabyte long. */
export function shortRepr(value: ArgValue, max = 80): string {
  if (typeof value === 'string' && value.length > max) return `${pyRepr(value.slice(0, max))}… (${value.length} characters)`;
  return pyRepr(value);
}

/** Python truthiness (`if value:`) of a description or JSON value: the string "False" is truthy, NaN too. */
export function pyTruthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false) return false;
  if (value === true) return true;
  if (typeof value === 'string') return value.length > 0;
  if (value instanceof PyFloat) return value.value !== 0;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'bigint') return value !== 0n;
  if (Array.isArray(value)) return value.length > 0;
  if (value instanceof Map) return value.size > 0;
  return typeof value !== 'object' || Object.keys(value).length > 0;
}

/** Python `==` between description values: ints and floats compare numerically, strings exactly. */
export function pyEquals(a: ArgValue, b: ArgValue): boolean {
  const num = (v: ArgValue): number | undefined =>
    typeof v === 'number' ? v : v instanceof PyFloat ? v.value : typeof v === 'boolean' ? Number(v) : undefined;
  const [na, nb] = [num(a), num(b)];
  if (na !== undefined && nb !== undefined) return na === nb;
  return a === b;
}

/** Python's `int(value)` applied to a description value (what `int(k)` does in the run-spec functions). */
export function pyInt(value: ArgValue, what: string): number {
  if (typeof value === 'boolean') return Number(value);
  if (typeof value === 'number' || value instanceof PyFloat) {
    const x = typeof value === 'number' ? value : value.value;
    if (Number.isNaN(x)) throw pyError('ValueError', `${what}: cannot convert float NaN to integer; give a whole number`);
    if (!Number.isFinite(x)) throw pyError('OverflowError', `${what}: cannot convert float infinity to integer; give a whole number`);
    return Math.trunc(x) + 0;
  }
  if (typeof value === 'string') {
    const n = pyParseInt(value);
    if (n === undefined) throw pyError('ValueError', `${what}: invalid literal for int() with base 10: ${pyRepr(value)}; give a whole number`);
    return n;
  }
  throw pyError('TypeError', `${what}: int() argument must be a string or a number, not '${pyTypeName(value)}'`);
}

/** Python's `sorted()` order for strings: by code point (JS `<` compares UTF-16 code units). */
export function comparePyStrings(a: string, b: string): number {
  const ca = [...a];
  const cb = [...b];
  for (let i = 0; i < Math.min(ca.length, cb.length); i++) {
    const d = ca[i]!.codePointAt(0)! - cb[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return ca.length - cb.length;
}

/** `value.replace(old, new)` when value must be a str (AttributeError otherwise, as in Python). */
export function requireStr(value: ArgValue, what: string): string {
  if (typeof value !== 'string') {
    throw pyError('AttributeError', `${what} must be text but got ${pyTypeName(value)} ${pyRepr(value)} ('${pyTypeName(value)}' object has no attribute 'replace'/'split')`);
  }
  return value;
}
