/** One profiled figure: the median of repeated measurements and their spread. */
export interface Measured {
  median: number;
  min: number;
  max: number;
  samples: number;
}

/** Median and spread of `values` (at least one). */
export function measured(values: readonly number[]): Measured {
  if (values.length === 0) throw new Error('measured: no samples');
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median, min: s[0]!, max: s[s.length - 1]!, samples: s.length };
}

/** Runs `fn` `warmup` times unmeasured, then `repeats` times; the median of its wall times in milliseconds. */
export async function timeMs(fn: () => Promise<unknown> | unknown, repeats: number, warmup = 1): Promise<Measured> {
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return measured(times);
}

/** Relative spread `(max − min) / median`, for reports. */
export const spreadOf = (m: Measured): number => (m.median > 0 ? (m.max - m.min) / m.median : 0);
