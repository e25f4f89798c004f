/**
 * Python keeps ints and floats apart and HELM's JSON shows it (`1` vs `1.0`); JavaScript has one number type.
 * flexhelm's rule: a plain JS `number` that is an integer is a Python int, a non-integral `number` is a Python float,
 * and an integral Python float is boxed as a `PyFloat` (`pyFloat(1)` prints `1.0`).
 */
export class PyFloat {
  constructor(readonly value: number) {}
  valueOf(): number {
    return this.value;
  }
  toString(): string {
    return formatPyFloat(this.value);
  }
  toJSON(): number {
    return this.value;
  }
}

/** A Python number as flexhelm carries it: int or float (see {@link PyFloat}). */
export type PyNumber = number | PyFloat;

/** The Python float `x`: boxed when integral (so it prints `1.0`), a plain number otherwise. */
export function pyFloat(x: number): PyNumber {
  return Number.isInteger(x) ? new PyFloat(x) : x;
}

/** The numeric value of a Python number. */
export function toNumber(x: PyNumber): number {
  return typeof x === 'number' ? x : x.value;
}

/** Whether Python would see `x` as a float. */
export function isPyFloat(x: unknown): boolean {
  return x instanceof PyFloat || (typeof x === 'number' && !Number.isInteger(x));
}

/**
 * Python's `repr(float)`: the shortest digits that round-trip (the same digits JavaScript picks), written in fixed
 * notation when the decimal exponent is in [-4, 16) and in scientific notation (`1e-05`, `1.5e+16`) otherwise.
 */
export function formatPyFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mantissa, expText] = Math.abs(x).toExponential().split('e');
  const exponent = Number(expText);
  const digits = mantissa!.replace('.', '');
  if (exponent < -4 || exponent >= 16) {
    const frac = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const expSign = exponent < 0 ? '-' : '+';
    return `${sign}${frac}e${expSign}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  const intPart = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
  const fracPart = digits.slice(exponent + 1) || '0';
  return `${sign}${intPart}.${fracPart}`;
}

/** Python's `repr(int)` for a JS integer (exact up to 2^53). */
export function formatPyInt(x: number): string {
  if (Object.is(x, -0)) return '0';
  if (Math.abs(x) < 1e21) return x.toFixed(0);
  return BigInt(x).toString();
}

/** Python's `str()`/`repr()` of a number as flexhelm carries it. */
export function formatPyNumber(x: PyNumber): string {
  if (x instanceof PyFloat) return formatPyFloat(x.value);
  return Number.isInteger(x) ? formatPyInt(x) : formatPyFloat(x);
}
