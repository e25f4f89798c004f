// Deterministic test inputs and the error measure the native kernel tests share.

/** n values of a sine of frequency `f` and amplitude `amp`: smooth, signed, reproducible weights and activations. */
export function wave(n: number, f: number, amp: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * f + 0.3) * amp);
}

/** Relative L2 error of `y` against a float64 reference. */
export function relErr(ref: Float64Array, y: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    num += (ref[i]! - y[i]!) ** 2;
    den += ref[i]! ** 2;
  }
  return Math.sqrt(num / den);
}
