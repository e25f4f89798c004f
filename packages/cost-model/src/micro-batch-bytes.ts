/**
 * Bytes one micro-batch of `rows` copies at a one-token step after `past` tokens: mask slice, hidden in and out, past
 * K/V in, present K/V out. `kvRow`: K (or V) values per token, kvHeads · headDim (hidden without grouped-query attention).
 */
export function microBatchBytes(rows: number, past: number, hidden: number, kvRow = hidden): number {
  const T = past + 1;
  return 4 * (rows * T + 2 * rows * hidden + 2 * rows * past * kvRow + 2 * rows * T * kvRow);
}
