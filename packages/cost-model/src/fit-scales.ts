/** Bounds of one fitted parameter; `log`: searched on a log scale (a multiplicative factor, lower bound above 0). */
export interface ParamRange {
  lo: number;
  hi: number;
  log?: boolean;
}

/**
 * Minimises `loss` over a few bounded parameters by coordinate descent: per parameter a grid scan of its range, then a
 * golden-section refinement around the best grid point, repeated for `sweeps` rounds. The loss of a cost model with
 * `max(load, compute)` has kinks, so gradients are not used; with a handful of parameters this takes milliseconds.
 */
export function fitScales<K extends string>(start: Record<K, number>, ranges: Record<K, ParamRange>, loss: (p: Record<K, number>) => number, sweeps = 5): Record<K, number> {
  const keys = Object.keys(ranges) as K[];
  const p = { ...start };
  const GRID = 24;
  for (let sweep = 0; sweep < sweeps; sweep++) {
    for (const key of keys) {
      const { lo, hi, log } = ranges[key];
      if (log && lo <= 0) throw new Error(`fitScales: ${key} is searched on a log scale but its lower bound is ${lo}`);
      const to = (u: number) => (log ? Math.exp(u) : u);
      const [a, b] = log ? [Math.log(lo), Math.log(hi)] : [lo, hi];
      const at = (u: number) => loss({ ...p, [key]: to(u) });
      let bestU = log ? Math.log(p[key]) : p[key];
      let best = at(bestU);
      const step = (b - a) / GRID;
      for (let i = 0; i <= GRID; i++) {
        const u = a + i * step;
        const l = at(u);
        if (l < best) [best, bestU] = [l, u];
      }
      // Golden section within one grid step either side of the best point.
      let x0 = Math.max(a, bestU - step);
      let x1 = Math.min(b, bestU + step);
      const r = (Math.sqrt(5) - 1) / 2;
      for (let i = 0; i < 30; i++) {
        const c = x1 - r * (x1 - x0);
        const d = x0 + r * (x1 - x0);
        if (at(c) < at(d)) x1 = d;
        else x0 = c;
      }
      const u = (x0 + x1) / 2;
      if (at(u) < best) bestU = u;
      p[key] = to(bestU);
    }
  }
  return p;
}
