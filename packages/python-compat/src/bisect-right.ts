/** Python's `bisect.bisect_right(a, x, lo, hi)` (numpy's `searchsorted(side='right')`) on a sorted array. */
export function bisectRight(a: ArrayLike<number>, x: number, lo = 0, hi = a.length): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (x < a[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
