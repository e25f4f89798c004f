/**
 * Square tiles of a transpose: 32 × 32 values read and written per tile stay in L1, and each tile's rows are written
 * contiguously (writing a column of a 2048-wide matrix touches values 8 KiB apart, all in one cache set: about 15 ns a
 * value against about 4 tiled).
 */
export const TRANSPOSE_TILE = 32;

/** Transposes a row-major `[rows, cols]` matrix into `dst` (`[cols, dstCols]`), at column offset `colOffset`. */
function transposeInto(src: Float32Array, rows: number, cols: number, dst: Float32Array, dstCols: number, colOffset: number): void {
  for (let c0 = 0; c0 < cols; c0 += TRANSPOSE_TILE) {
    const c1 = Math.min(cols, c0 + TRANSPOSE_TILE);
    for (let r0 = 0; r0 < rows; r0 += TRANSPOSE_TILE) {
      const r1 = Math.min(rows, r0 + TRANSPOSE_TILE);
      for (let c = c0; c < c1; c++) {
        const d = c * dstCols + colOffset;
        for (let r = r0; r < r1; r++) dst[d + r] = src[r * cols + c]!;
      }
    }
  }
}

/** PyTorch `[out, in]` → MatMul's `[in, out]`. */
export function transposed(w: Float32Array, outDim: number, inDim: number): Float32Array {
  const t = new Float32Array(w.length);
  transposeInto(w, outDim, inDim, t, outDim, 0);
  return t;
}
