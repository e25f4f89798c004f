import { HelmError, PyFloat, formatPyFloat, formatPyInt, pyFloat, type ArgValue, type PythonErrorClass } from '@flexhelm/core';

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
function pyTypeName(value: ArgValue): string {
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

/** Python's `repr(value)` for the scalar and container values descriptions and specs carry. */
export function pyRepr(value: ArgValue): string {
  if (typeof value === 'string') {
    const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
    const body = value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t');
    return quote + (quote === "'" ? body.replace(/'/g, "\\'") : body) + quote;
  }
  if (Array.isArray(value)) return `[${value.map((v) => pyRepr(v)).join(', ')}]`;
  if (value instanceof Map) return `{${[...value.entries()].map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(', ')}}`;
  if (value !== null && typeof value === 'object' && !(value instanceof PyFloat)) {
    return `{${Object.entries(value).map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(', ')}}`;
  }
  return pyStr(value);
}

/** Python truthiness (`if value:`): note the string "False" is truthy. */
export function pyTruthy(value: ArgValue): boolean {
  if (value === null || value === undefined || value === false) return false;
  if (value === true) return true;
  if (typeof value === 'string') return value.length > 0;
  if (value instanceof PyFloat) return value.value !== 0;
  if (typeof value === 'number') return value !== 0;
  if (Array.isArray(value)) return value.length > 0;
  if (value instanceof Map) return value.size > 0;
  return Object.keys(value).length > 0;
}

/** Python `==` between description values: ints and floats compare numerically, strings exactly. */
export function pyEquals(a: ArgValue, b: ArgValue): boolean {
  const num = (v: ArgValue): number | undefined =>
    typeof v === 'number' ? v : v instanceof PyFloat ? v.value : typeof v === 'boolean' ? Number(v) : undefined;
  const [na, nb] = [num(a), num(b)];
  if (na !== undefined && nb !== undefined) return na === nb;
  return a === b;
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

/** `int(text)` as Python parses a string, or undefined when Python raises ValueError. */
export function parsePyIntLiteral(text: string): number | undefined {
  const s = numberText(text);
  if (!PY_INT.test(s)) return undefined;
  const n = Number(s.replace(/_/g, ''));
  return Object.is(n, -0) ? 0 : n;
}

/** `float(text)` as Python parses a string, or undefined when Python raises ValueError. */
export function parsePyFloatLiteral(text: string): number | undefined {
  const s = numberText(text);
  if (!PY_FLOAT.test(s)) return undefined;
  const lower = s.toLowerCase();
  if (/^[+-]?nan$/.test(lower)) return NaN;
  if (/^[+-]?inf(inity)?$/.test(lower)) return lower.startsWith('-') ? -Infinity : Infinity;
  return Number(s.replace(/_/g, ''));
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
    const n = parsePyIntLiteral(value);
    if (n === undefined) throw pyError('ValueError', `${what}: invalid literal for int() with base 10: ${pyRepr(value)}; give a whole number`);
    return n;
  }
  throw pyError('TypeError', `${what}: int() argument must be a string or a number, not '${pyTypeName(value)}'`);
}

/** A Python float literal of the source (`1.0` → PyFloat, `0.3` → 0.3). */
export const f = pyFloat;

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
