/** Python's `seq[start:stop]` (negative indices count from the end; out-of-range bounds are clamped). */
export function pySlice<T>(seq: readonly T[], start?: number, stop?: number): T[] {
  const n = seq.length;
  const clamp = (i: number | undefined, fallback: number) => (i === undefined ? fallback : i < 0 ? Math.max(0, n + i) : Math.min(i, n));
  const from = clamp(start, 0);
  const to = clamp(stop, n);
  return to > from ? seq.slice(from, to) : [];
}
