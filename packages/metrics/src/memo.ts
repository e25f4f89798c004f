/**
 * Memoises a pure string function with a bounded cache (cleared when full). Metrics score the same gold and
 * predicted texts again for every trial, perturbation and `@k`, and tokenization is the expensive part.
 */
export function memoizeText<T>(fn: (text: string) => T, maxEntries = 50_000): (text: string) => T {
  const cache = new Map<string, T>();
  return (text) => {
    let value = cache.get(text);
    if (value === undefined) {
      if (cache.size >= maxEntries) cache.clear();
      value = fn(text);
      cache.set(text, value);
    }
    return value;
  };
}
