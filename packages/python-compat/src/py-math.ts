/**
 * `exp` and `log` rounded correctly, as glibc's (which CPython's `math` and numpy call) are in practice. V8's
 * `Math.exp`/`Math.log` are only faithful (within one ulp), so e.g. `Math.exp(-3)` ends in …944 where Python prints
 * …94 — visible in HELM's `max_prob`. These evaluate in double-double precision and round once.
 */

type DD = [hi: number, lo: number];

const SPLITTER = 134217729; // 2^27 + 1

function twoSum(a: number, b: number): DD {
  const s = a + b;
  const bb = s - a;
  return [s, a - (s - bb) + (b - bb)];
}

function split(a: number): DD {
  const t = SPLITTER * a;
  const hi = t - (t - a);
  return [hi, a - hi];
}

function twoProd(a: number, b: number): DD {
  const p = a * b;
  const [ah, al] = split(a);
  const [bh, bl] = split(b);
  return [p, ah * bh - p + ah * bl + al * bh + al * bl];
}

function ddAdd(a: DD, b: DD): DD {
  const [s, e] = twoSum(a[0], b[0]);
  const [hi, lo] = twoSum(s, e + a[1] + b[1]);
  return [hi, lo];
}

function ddMul(a: DD, b: DD): DD {
  const [p, e] = twoProd(a[0], b[0]);
  return twoSum(p, e + a[0] * b[1] + a[1] * b[0]);
}

function ddDiv(a: DD, n: number): DD {
  const q = a[0] / n;
  const [p, e] = twoProd(q, n);
  const r = (a[0] - p - e + a[1]) / n;
  return twoSum(q, r);
}

const LN2: DD = [Math.LN2, 2.3190468138462996e-17];

/** e^x for x given as a double-double, returned as a double-double scaled by 2^k. */
function expParts(x: DD): { m: DD; k: number } {
  const k = Math.round(x[0] / LN2[0]);
  // r = x - k·ln2, exactly enough: k·ln2_hi is formed without rounding error.
  const kHi = twoProd(k, LN2[0]);
  let r = ddAdd(x, [-kHi[0], -kHi[1]]);
  r = ddAdd(r, [-k * LN2[1], 0]);
  // e^r by Taylor series on r/2^8, then squared 8 times (|r/256| < 0.0014 converges in a few terms).
  const s = [r[0] / 256, r[1] / 256] as DD;
  let term: DD = [1, 0];
  let sum: DD = [1, 0];
  for (let n = 1; n <= 14; n++) {
    term = ddDiv(ddMul(term, s), n);
    sum = ddAdd(sum, term);
    if (Math.abs(term[0]) < 1e-36) break;
  }
  for (let i = 0; i < 8; i++) sum = ddMul(sum, sum);
  return { m: sum, k };
}

function scale(x: number, k: number): number {
  // Two steps keep 2^k representable for k near the exponent limits.
  const half = Math.trunc(k / 2);
  return x * 2 ** half * 2 ** (k - half);
}

function expDD(x: DD): number {
  if (Number.isNaN(x[0])) return NaN;
  if (x[0] > 709.8) return Infinity;
  if (x[0] < -745.2) return 0;
  const { m, k } = expParts(x);
  return scale(m[0] + m[1], k);
}

/** Correctly rounded `exp(x)` (Python `math.exp`, numpy `np.exp`). */
export function pyExp(x: number): number {
  if (x === 0) return 1;
  if (!Number.isFinite(x)) return Math.exp(x);
  return expDD([x, 0]);
}

/** Correctly rounded natural logarithm (Python `math.log(x)`): one Newton step from `Math.log` in double-double. */
export function pyLog(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) return Math.log(x);
  const y = Math.log(x);
  const { m, k } = expParts([y, 0]);
  // y + (x - e^y)/e^y with e^y = m·2^k.
  const xs = scale(x, -k);
  const diff = ddAdd([xs, 0], [-m[0], -m[1]]);
  const correction = (diff[0] + diff[1]) / m[0];
  const [hi, lo] = twoSum(y, correction);
  return hi + lo;
}

/** Python's `round(x)` to an int: halves go to the even neighbour. */
export function pyRound(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** Python's `round(x, 3)`: correctly rounded on the exact binary value, exact ties to even. */
export function pyRound3(x: number): number {
  // x is exactly halfway between two multiples of 0.001 only if x = (2k+1)/2000 is a binary fraction, which needs
  // 125 | 2k+1: x = j/16 with j odd. (x * 1000 landing on .5 after rounding, as 0.0005 does, is no tie.)
  const sixteenths = x * 16;
  if (Number.isInteger(sixteenths) && sixteenths % 2 !== 0) {
    const floor = Math.floor(x * 1000);
    return (floor % 2 === 0 ? floor : floor + 1) / 1000;
  }
  // toFixed rounds the exact value too; it differs from Python only on exact ties (it rounds them up).
  return Number(x.toFixed(3));
}
