/** How far a candidate's logits are from the fp32 reference's, over `rows` rows of `vocab` logits. */
export interface LogitError {
  rows: number;
  maxAbs: number;
  meanAbs: number;
  /** Root mean square of the reference logits: the scale errors are judged against. */
  refRms: number;
  /** Rows whose argmax matches the reference. */
  argmaxAgree: number;
  /** Rows whose argmax differs although the reference's top-1 margin exceeds twice `maxAbs` (a real disagreement). */
  argmaxClearMisses: number;
}

export function logitError(ref: Float32Array, test: Float32Array, rows: number, vocab: number): LogitError {
  if (ref.length !== rows * vocab || test.length !== rows * vocab) throw new Error(`logitError: expected ${rows}×${vocab} logits, got ${ref.length} and ${test.length}`);
  let maxAbs = 0;
  let sumAbs = 0;
  let sumSq = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(ref[i]! - test[i]!);
    if (d > maxAbs) maxAbs = d;
    sumAbs += d;
    sumSq += ref[i]! * ref[i]!;
  }
  let argmaxAgree = 0;
  const margins: number[] = [];
  const agrees: boolean[] = [];
  for (let r = 0; r < rows; r++) {
    let best = 0;
    let second = -Infinity;
    let bestTest = 0;
    const o = r * vocab;
    for (let v = 1; v < vocab; v++) {
      if (ref[o + v]! > ref[o + best]!) {
        second = ref[o + best]!;
        best = v;
      } else if (ref[o + v]! > second) second = ref[o + v]!;
      if (test[o + v]! > test[o + bestTest]!) bestTest = v;
    }
    if (vocab === 1) second = ref[o]!;
    const agree = best === bestTest;
    if (agree) argmaxAgree++;
    agrees.push(agree);
    margins.push(ref[o + best]! - second);
  }
  const argmaxClearMisses = agrees.filter((a, r) => !a && margins[r]! > 2 * maxAbs).length;
  return { rows, maxAbs, meanAbs: sumAbs / ref.length, refRms: Math.sqrt(sumSq / ref.length), argmaxAgree, argmaxClearMisses };
}

/**
 * The accuracy gate a reduced-precision dtype must pass against fp32 on the same inputs. Errors are relative to the
 * reference logits' RMS, since real OPT logits are O(10) and the tiny test models' O(1).
 */
export const ACCURACY_GATE = {
  /** max |Δlogit| / rms(logits) */
  maxRelative: 0.05,
  /** mean |Δlogit| / rms(logits) */
  meanRelative: 0.01,
} as const;

/**
 * The gate of the ggml types whose every row runs on 8-bit activations (Q8_0 and Q4_0 on the VNNI GEMM, prompt rows
 * included: llama.cpp's arithmetic, each activation block of 32 rounded to 1/127 of its largest). On the made Llama
 * model of `quantized-gguf.test.ts` that moves the logits max 0.090 / 0.078 and mean 0.013 / 0.013 of their rms from
 * the dequantized weights' (Q8_0 / Q4_0; widened to bf16 instead: 0.041 / 0.033, mean 0.0055), about what Q8_0's own
 * rounding of the weights moves them (0.071, mean 0.011) and a fourteenth of Q4_0's (1.35, mean 0.18).
 * FLEXHELM_QUANT_INT8_PREFILL=0 keeps prompt rows on the widened bf16 path, within `ACCURACY_GATE`.
 */
export const INT8_ACTIVATION_GATE = {
  /** max |Δlogit| / rms(logits) */
  maxRelative: 0.12,
  /** mean |Δlogit| / rms(logits) */
  meanRelative: 0.02,
} as const;

/**
 * The gate of the K-quants (Q4_K, Q5_K, Q6_K and the Q4_K_M / Q5_K_M mixes) on 8-bit activations: every row of 8 or
 * more runs the tiled GEMM on q8_K activations — each 256 rounded to 1/127 of their largest, as llama.cpp rounds them
 * for these types; coarser than Q8_0 / Q4_0's 32 — and decode rows the row kernel on the same q8_K. On the made Llama
 * model of `quantized-gguf.test.ts` that moves the logits max 0.135 / 0.125 and mean 0.020 / 0.020 of their rms from
 * the dequantized weights' (Q4_K_M / Q5_K_M; prompt rows widened to bf16 instead, FLEXHELM_QUANT_INT8_PREFILL=0:
 * 0.039 / 0.043, mean 0.0064, within `ACCURACY_GATE`).
 */
export const Q8K_ACTIVATION_GATE = {
  /** max |Δlogit| / rms(logits) */
  maxRelative: 0.18,
  /** mean |Δlogit| / rms(logits) */
  meanRelative: 0.03,
} as const;

/** The gate a model whose matrices are ggml blocks of `type` (or a llama.cpp mix such as `Q4_K_M`) must pass against its dequantized weights. */
export function quantizedTypeGate(type: string): AccuracyGate {
  if (type === 'Q8_0' || type === 'Q4_0') return INT8_ACTIVATION_GATE;
  if (/^Q[456]_K(_[SM])?$/.test(type)) return Q8K_ACTIVATION_GATE;
  return ACCURACY_GATE;
}

export interface AccuracyGate {
  maxRelative: number;
  meanRelative: number;
}

/** Within the gate's relative max and mean error, and no argmax flip the error cannot explain. */
export function passesGate(e: LogitError, gate: AccuracyGate = ACCURACY_GATE): boolean {
  return e.maxAbs <= gate.maxRelative * e.refRms && e.meanAbs <= gate.meanRelative * e.refRms && e.argmaxClearMisses === 0;
}

export function describeLogitError(e: LogitError): string {
  const rel = (x: number) => (e.refRms > 0 ? (x / e.refRms).toExponential(2) : 'n/a');
  return `max |Δ| ${e.maxAbs.toExponential(2)} (${rel(e.maxAbs)} of rms), mean |Δ| ${e.meanAbs.toExponential(2)} (${rel(e.meanAbs)}), argmax ${e.argmaxAgree}/${e.rows}`;
}
