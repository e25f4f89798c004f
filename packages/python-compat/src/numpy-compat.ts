/**
 * The few numpy 1.23/1.24 behaviours that decide HELM's calibration numbers bit for bit: pairwise summation
 * (`np.sum`/`np.mean`), the default `argsort` (introsort, not stable for more than 16 elements) and
 * `searchsorted(side="left")`.
 */

function pairwise(a: ArrayLike<number>, start: number, n: number): number {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += a[start + i]!;
    return res;
  }
  if (n <= 128) {
    const r = [0, 1, 2, 3, 4, 5, 6, 7].map((j) => a[start + j]);
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j]! += a[start + i + j]!;
    let res = r[0]! + r[1]! + (r[2]! + r[3]!) + (r[4]! + r[5]! + (r[6]! + r[7]!));
    for (; i < n; i++) res += a[start + i]!;
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwise(a, start, n2) + pairwise(a, start + n2, n - n2);
}

/** `np.sum` of a 1-D float64 array: the identity 0.0 plus numpy's pairwise sum of all elements. */
export function npSum(a: ArrayLike<number>): number {
  return 0 + pairwise(a, 0, a.length);
}

/** `np.mean` of a 1-D array. */
export function npMean(a: ArrayLike<number>): number {
  return npSum(a) / a.length;
}

const less = (a: number, b: number) => a < b || (Number.isNaN(b) && !Number.isNaN(a));

function msb(n: number): number {
  let depth = 0;
  while (n > 1) {
    n = Math.floor(n / 2);
    depth++;
  }
  return depth;
}

/** numpy's `aheapsort` on idx[start … start+count): a 1-based heap over the index range. */
function heapArgsort(v: ArrayLike<number>, idx: number[], start: number, count: number): void {
  const a = (i: number) => idx[start + i - 1]!; // heapsort's 1-based view, 1 ≤ i ≤ count
  const set = (i: number, x: number) => {
    idx[start + i - 1] = x;
  };
  const siftDown = (from: number, n: number, tmp: number) => {
    let i = from;
    for (let j = from << 1; j <= n; ) {
      if (j < n && less(v[a(j)]!, v[a(j + 1)]!)) j += 1;
      if (!less(v[tmp]!, v[a(j)]!)) break;
      set(i, a(j));
      i = j;
      j += j;
    }
    set(i, tmp);
  };
  let n = count;
  for (let l = n >> 1; l > 0; --l) siftDown(l, n, a(l));
  for (; n > 1; ) {
    const tmp = a(n);
    set(n, a(1));
    n -= 1;
    siftDown(1, n, tmp);
  }
}

/** `np.argsort(v)` with the default kind ("quicksort" = numpy's introsort), including its order among ties. */
export function npArgsort(v: ArrayLike<number>): number[] {
  const idx = Array.from({ length: v.length }, (_, i) => i);
  const num = v.length;
  if (num < 2) return idx;
  const stack: number[] = [];
  const depths: number[] = [];
  let pl = 0;
  let pr = num - 1;
  let cdepth = msb(num) * 2;
  const swap = (i: number, j: number) => {
    const t = idx[i]!;
    idx[i] = idx[j]!;
    idx[j] = t;
  };
  for (;;) {
    if (cdepth < 0) {
      heapArgsort(v, idx, pl, pr - pl + 1);
    } else {
      while (pr - pl > 15) {
        const pm = pl + ((pr - pl) >> 1);
        if (less(v[idx[pm]!]!, v[idx[pl]!]!)) swap(pm, pl);
        if (less(v[idx[pr]!]!, v[idx[pm]!]!)) swap(pr, pm);
        if (less(v[idx[pm]!]!, v[idx[pl]!]!)) swap(pm, pl);
        const vp = v[idx[pm]!];
        let pi = pl;
        let pj = pr - 1;
        swap(pm, pj);
        for (;;) {
          do ++pi;
          while (less(v[idx[pi]!]!, vp!));
          do --pj;
          while (less(vp!, v[idx[pj]!]!));
          if (pi >= pj) break;
          swap(pi, pj);
        }
        swap(pi, pr - 1);
        if (pi - pl < pr - pi) {
          stack.push(pi + 1, pr);
          pr = pi - 1;
        } else {
          stack.push(pl, pi - 1);
          pl = pi + 1;
        }
        depths.push(--cdepth);
      }
      for (let pi = pl + 1; pi <= pr; ++pi) {
        const vi = idx[pi]!;
        const vp = v[vi!];
        let pj = pi;
        while (pj > pl && less(vp!, v[idx[pj - 1]!]!)) {
          idx[pj] = idx[pj - 1]!;
          pj--;
        }
        idx[pj] = vi;
      }
    }
    if (stack.length === 0) break;
    pr = stack.pop()!;
    pl = stack.pop()!;
    cdepth = depths.pop()!;
  }
  return idx;
}

/** `np.searchsorted(sorted, x, side="left")`: the first index whose value is not less than x. */
export function npSearchsortedLeft(sorted: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (less(sorted[mid]!, x)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
