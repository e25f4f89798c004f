import { PyFloat, isPyFloat, pyFloat, toNumber, type PyNumber } from './py-float.js';

/**
 * Python arithmetic on flexhelm's int/float-tagged numbers. HELM's stats.json shows whether a value is an int or a
 * float (`"sum": 1` vs `"sum": 1.0`), and Python decides that by the operand types, so every operation keeps it.
 */
function result(x: number, float: boolean): PyNumber {
  return float ? pyFloat(x) : x;
}

/** `a + b`. */
export function pyAdd(a: PyNumber, b: PyNumber): PyNumber {
  return result(toNumber(a) + toNumber(b), isPyFloat(a) || isPyFloat(b));
}

/** `a - b`. */
export function pySub(a: PyNumber, b: PyNumber): PyNumber {
  return result(toNumber(a) - toNumber(b), isPyFloat(a) || isPyFloat(b));
}

/** `a * b`. */
export function pyMul(a: PyNumber, b: PyNumber): PyNumber {
  return result(toNumber(a) * toNumber(b), isPyFloat(a) || isPyFloat(b));
}

/** `a / b` (true division: always a float). */
export function pyTrueDiv(a: PyNumber, b: PyNumber): PyNumber {
  return pyFloat(toNumber(a) / toNumber(b));
}

/** `min(a, b)`: Python returns the first argument unless the second is strictly smaller (this decides int vs float). */
export function pyMin(a: PyNumber, b: PyNumber): PyNumber {
  return toNumber(b) < toNumber(a) ? b : a;
}

/** `max(a, b)`: the first argument unless the second is strictly larger. */
export function pyMax(a: PyNumber, b: PyNumber): PyNumber {
  return toNumber(b) > toNumber(a) ? b : a;
}

/** `abs(x)`. */
export function pyAbs(x: PyNumber): PyNumber {
  return result(Math.abs(toNumber(x)), isPyFloat(x));
}

/** A float as Python would hold it after `float(x)`. */
export function asPyFloat(x: PyNumber | boolean): PyNumber {
  return pyFloat(typeof x === 'boolean' ? (x ? 1 : 0) : toNumber(x));
}

export { PyFloat };
