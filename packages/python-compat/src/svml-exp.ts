import { fma } from './exact-fma.js';
import { pyExp } from './py-math.js';

/**
 * `np.exp` on float64 as numpy 1.24 computes it on AVX-512 machines (the setup HELM 0.2.1's golden outputs come
 * from): Intel SVML's `__svml_exp8` low-accuracy variant, reproduced operation by operation with an exact FMA.
 * x·log2(e) is cut (toward zero) to 1/16 steps N; exp(x) = 2^floor(N) · 2^(frac N) · exp(r) with r = x − N·ln2
 * and a degree-6 polynomial. Results differ from the correctly rounded exp in the last bit now and then — e.g.
 * exp(-3) is 0.04978706836786394 here, …944 correctly rounded — which is why HELM's `max_prob` needs this.
 */

const view = new DataView(new ArrayBuffer(8));
function fromBits(hex: bigint): number {
  view.setBigUint64(0, hex);
  return view.getFloat64(0);
}
function lowBits(x: number): number {
  view.setFloat64(0, x);
  return view.getUint32(4);
}

/** 2^(j/16), j = 0 … 15, correctly rounded (as SVML's table holds them; V8's `2 ** (j / 16)` is off for some j). */
const TWO_POW_J16 = [
  0x3ff0000000000000n, 0x3ff0b5586cf9890fn, 0x3ff172b83c7d517bn, 0x3ff2387a6e756238n, 0x3ff306fe0a31b715n, 0x3ff3dea64c123422n,
  0x3ff4bfdad5362a27n, 0x3ff5ab07dd485429n, 0x3ff6a09e667f3bcdn, 0x3ff7a11473eb0187n, 0x3ff8ace5422aa0dbn, 0x3ff9c49182a3f090n,
  0x3ffae89f995ad3adn, 0x3ffc199bdd85529cn, 0x3ffd5818dcfba487n, 0x3ffea4afa2a490dan,
].map(fromBits);
const LOG2E = fromBits(0x3ff71547652b82fen);
/** 1.5·2^48 + 1023 (the 1023 sits in the low mantissa bits below the 1/16 position and does not disturb j). */
const SHIFTER = fromBits(0x42f8000000003ff0n);
const LN2_HI = fromBits(0x3fe62e42fefa39efn);
const LN2_LO = fromBits(0x3c7abc9e3b39803fn);
const C6 = fromBits(0x3f572eb5ef0d213dn);
const C5 = fromBits(0x3f81106603d97c00n);
const C4 = fromBits(0x3fa555564bb4f5f0n);
const C3 = fromBits(0x3fc5555554b508a2n);
const C2 = fromBits(0x3fe0000000002622n);
const THRESHOLD = fromBits(0x40861da04cbafe44n);

/** numpy 1.24's `np.exp(x)` for one float64 on an AVX-512 machine. */
export function npExp(x: number): number {
  if (!Number.isFinite(x) || Math.abs(x) >= THRESHOLD) return pyExp(x); // SVML's rare-case path: overflow, underflow, specials
  const z = fma(x, LOG2E, SHIFTER, 'rz');
  const n = z - SHIFTER;
  const th = TWO_POW_J16[lowBits(z) & 15]!;
  let r = fma(-n, LN2_HI, x);
  r = fma(-LN2_LO, n, r);
  const r2 = r * r;
  const p56 = fma(C6, r, C5);
  const p34 = fma(C4, r, C3);
  const r3 = r2 * r;
  const p12 = fma(r2, C2, r);
  const p36 = fma(r2, p56, p34);
  const p16 = fma(r3, p36, p12);
  const res = fma(th, p16, th);
  const m = Math.floor(n);
  return res * 2 ** m;
}
