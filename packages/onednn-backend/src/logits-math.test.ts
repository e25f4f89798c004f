import { jsLogitsMath, logSumExp } from '@flexhelm/engine';
import { describe, expect, it } from 'vitest';
import { oneDnnStatus, type NativeBinding } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';

const status = oneDnnStatus();
const native = status.available ? status.binding : (undefined as unknown as NativeBinding);

/** max + log(sum) of the native parts: what OneDnnBackend.logSumExp returns. */
function nativeLse(row: Float32Array, scalar: boolean): number | null {
  const parts = native.logSumExpParts(row, scalar);
  return parts ? parts[0] + Math.log(parts[1]) : null;
}

/** What logSumExp computes before its logarithm: the max, and Σ Math.exp(v − max) in index order (its exp is Math.exp's bits). */
function jsParts(row: Float32Array): [number, number] {
  let max = -Infinity;
  for (const v of row) if (v > max) max = v;
  let sum = 0;
  for (const v of row) sum += Math.exp(v - max);
  return [max, sum];
}

/** Both native paths give the JavaScript's max and sum, and so its log-sum-exp. */
function expectSameBits(row: Float32Array, label: object): void {
  const want = jsParts(row);
  for (const scalar of [false, true]) {
    const got = native.logSumExpParts(row, scalar);
    if (got?.[0] !== want[0] || got[1] !== want[1]) expect({ ...label, scalar, got }).toEqual({ ...label, scalar, got: want });
    expect(nativeLse(row, scalar)).toBe(logSumExp(row));
  }
}

function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** The float32 next to v towards −∞ (dir −1) or +∞ (dir 1). */
function f32Step(v: number, dir: 1 | -1): number {
  const f = new Float32Array([v]);
  const bits = new Int32Array(f.buffer);
  if (v === 0) return dir * 1.401298464324817e-45;
  bits[0] = bits[0]! + (v > 0 === (dir > 0) ? 1 : -1);
  return f[0]!;
}

/**
 * The HELM logprobs of every generated and echoed token come from contract's `logSumExp` (fdlibm's exp, summed in
 * index order in doubles). The native one must give the very same bits, on the AVX-512 path (8 exps a vector, three
 * branches blended) and on the scalar loop, or hand the row back (null).
 */
describe.skipIf(!status.available)('logSumExpParts: contract logSumExp bit for bit', () => {
  it('random rows of 1–300 values (vector body and scalar tail) over spans from 0.002 to 600', () => {
    const next = random(11);
    const scales = [0.001, 0.05, 0.3, 0.6, 1, 3, 12, 40, 150, 299];
    for (let trial = 0; trial < 6000; trial++) {
      const n = 1 + Math.floor(next() * 300);
      const scale = scales[trial % scales.length]!;
      expectSameBits(
        Float32Array.from({ length: n }, () => (next() * 2 - 1) * scale),
        { trial, n, scale },
      );
    }
  });

  it('arguments next to every branch edge of fdlibm’s exp and every step of k down to −1009', () => {
    const ln2 = Math.LN2;
    const edges = [0.5 * ln2, 1.5 * ln2, 2 ** -28, 699.99];
    for (let k = 1; k <= 1009; k++) edges.push((k + 0.5) * ln2, k * ln2);
    const values: number[] = [0];
    for (const e of edges) {
      const v = Math.fround(-e);
      values.push(v, f32Step(v, 1), f32Step(v, -1), f32Step(f32Step(v, 1), 1));
    }
    const inRange = values.filter((v) => v > -700);
    // Rows of 16 with 0 (the max) first: every value goes through the vector path, a few through the tail.
    for (let i = 0; i < inRange.length; i += 15) {
      expectSameBits(Float32Array.from([0, ...inRange.slice(i, i + 15)]), { from: i });
    }
  });

  it('a 128,256-token vocabulary row, with ties at the max', () => {
    const next = random(3);
    const row = Float32Array.from({ length: 128_256 }, () => next() * 30 - 20);
    row[5] = 10;
    row[99_999] = 10;
    expectSameBits(row, {});
  });

  it('hands back rows it cannot compute as fdlibm does (non-finite, a span of 700 or more, empty)', () => {
    const rows = [new Float32Array(0), Float32Array.from([0, Number.NaN, 1]), Float32Array.from([0, Number.POSITIVE_INFINITY]), Float32Array.from([0, -Infinity, 2]), Float32Array.from([0, -700]), Float32Array.from([...Array(20).fill(1), -750])];
    for (const row of rows) {
      expect(native.logSumExpParts(row)).toBeNull();
      expect(native.logSumExpParts(row, true)).toBeNull();
    }
    expect(native.logSumExpParts(Float32Array.from([0, -699.99]))).not.toBeNull();
  });

});

describe.skipIf(!status.available)('logitsArgmax / logitsTopK / logitsAllFinite: contract’s argmax, topK and allFinite exactly', () => {
  /** The native top k as contract's objects, or null. */
  const nativeTop = (row: Float32Array, k: number, scalar: boolean) => {
    const flat = native.logitsTopK(row, k, scalar);
    if (!flat) return null;
    return Array.from({ length: flat.length / 2 }, (_, i) => ({ id: flat[2 * i]!, value: flat[2 * i + 1]! }));
  };

  it('random rows with many ties (values on a coarse grid), infinities, ±0, k from 0 to 64', () => {
    const next = random(5);
    for (let trial = 0; trial < 1500; trial++) {
      const n = 1 + Math.floor(next() * 400);
      const levels = 1 + (trial % 40);
      const row = Float32Array.from({ length: n }, () => Math.floor(next() * levels) - levels / 2);
      if (trial % 7 === 0) row[Math.floor(next() * n)] = -0;
      if (trial % 11 === 0) row[Math.floor(next() * n)] = trial % 22 === 0 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
      const k = trial % 65;
      for (const scalar of [false, true]) {
        expect(native.logitsAllFinite(row, scalar)).toBe(jsLogitsMath.allFinite(row));
        expect(native.logitsArgmax(row, scalar)).toBe(jsLogitsMath.argmax(row));
        expect(nativeTop(row, k, scalar)).toEqual(jsLogitsMath.topK(row, k));
      }
    }
  });

  it('a 128,256-token row: the max repeated, the top 20', () => {
    const next = random(8);
    const row = Float32Array.from({ length: 128_256 }, () => Math.round(next() * 2000) / 100);
    row[70_000] = 25;
    row[90_000] = 25;
    for (const scalar of [false, true]) {
      expect(native.logitsArgmax(row, scalar)).toBe(70_000);
      expect(nativeTop(row, 20, scalar)).toEqual(jsLogitsMath.topK(row, 20));
    }
  });

  it('declines NaN rows, empty rows (argmax), k above 64 or fractional; refuses arguments of the wrong type', () => {
    const withNan = Float32Array.from({ length: 40 }, (_, i) => (i === 17 ? Number.NaN : i));
    for (const scalar of [false, true]) {
      expect(native.logitsArgmax(withNan, scalar)).toBeNull();
      expect(native.logitsAllFinite(withNan, scalar)).toBe(false);
      expect(native.logitsAllFinite(Float32Array.from({ length: 33 }, (_, i) => (i === 32 ? -Infinity : i)), scalar)).toBe(false);
      expect(native.logitsAllFinite(new Float32Array(0), scalar)).toBe(true);
      expect(native.logitsTopK(withNan, 3, scalar)).toBeNull();
      expect(native.logitsArgmax(new Float32Array(0), scalar)).toBeNull();
      expect(native.logitsTopK(new Float32Array(0), 3, scalar)).toEqual([]);
      expect(native.logitsTopK(Float32Array.from([1, 2]), 65, scalar)).toBeNull();
      expect(native.logitsTopK(Float32Array.from([1, 2]), 1.5, scalar)).toBeNull();
    }
    // Wrong argument types are refused in one line, not read as something else.
    const bad = (f: () => unknown) => expect(f).toThrow(TypeError);
    bad(() => native.logSumExpParts(new Float64Array(4) as unknown as Float32Array));
    bad(() => native.logitsArgmax([1, 2] as unknown as Float32Array));
    bad(() => native.logitsAllFinite(new Uint16Array(2) as unknown as Float32Array));
    bad(() => native.logitsTopK(Float32Array.from([1, 2]), '3' as unknown as number));
  });

  it('OneDnnBackend.logitsMath: the native results, or the JavaScript on the rows declined', () => {
    const { logitsMath } = new OneDnnBackend();
    const rows = [Float32Array.from({ length: 77 }, (_, i) => Math.sin(i) * 9), Float32Array.from([0, -750, 3]), Float32Array.from([0, -Infinity, 2]), Float32Array.from([Number.NaN, 1, 5, 5])];
    for (const row of rows) {
      expect(Object.is(logitsMath.logSumExp(row), logSumExp(row))).toBe(true);
      expect(logitsMath.argmax(row)).toBe(jsLogitsMath.argmax(row));
      expect(logitsMath.allFinite(row)).toBe(jsLogitsMath.allFinite(row));
      for (const k of [0, 1, 3, 70]) expect(logitsMath.topK(row, k)).toEqual(jsLogitsMath.topK(row, k));
    }
  });
});
