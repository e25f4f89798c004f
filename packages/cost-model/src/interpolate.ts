/** Piecewise-linear in x through the points, linear through the origin's slope of the last point beyond them. */
export function interpolate(xs: readonly number[], ys: readonly number[], x: number): number {
  if (xs.length === 0) throw new Error('interpolate: no points');
  if (x <= xs[0]!) return ys[0]!;
  for (let i = 1; i < xs.length; i++) {
    if (x <= xs[i]!) {
      const t = (x - xs[i - 1]!) / (xs[i]! - xs[i - 1]!);
      return ys[i - 1]! + t * (ys[i]! - ys[i - 1]!);
    }
  }
  // Beyond the largest measured rows the cost grows in proportion to the rows (GEMMs are compute-bound there).
  return (ys[ys.length - 1]! / xs[xs.length - 1]!) * x;
}
