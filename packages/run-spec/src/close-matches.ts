/** Names longer than this get no fuzzy matching: no run-spec, model or argument name comes close to that length. */
export const MAX_CLOSE_MATCH_LENGTH = 200;

/** Levenshtein distance of two short strings. */
function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = row[j]!;
      row[j] = Math.min(up + 1, row[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return row[b.length]!;
}

/**
 * Names in `candidates` close to `name` (shared prefix, containment or edit distance ≤ 3), best first. The cost is
 * bounded whatever `name` is: a name longer than {@link MAX_CLOSE_MATCH_LENGTH} matches nothing, and the edit distance
 * is computed only when the lengths differ by at most 3 (it is at least their difference).
 */
export function closeMatches(name: string, candidates: Iterable<string>, limit = 5): string[] {
  if (name.length === 0 || name.length > MAX_CLOSE_MATCH_LENGTH) return [];
  const lower = name.toLowerCase();
  const found: { c: string; d: number }[] = [];
  for (const c of candidates) {
    const d = Math.abs(c.length - name.length) <= 3 ? editDistance(lower, c.toLowerCase()) : Infinity;
    if (d <= 3 || c.startsWith(name) || name.startsWith(c) || c.includes(name)) found.push({ c, d });
  }
  return found
    .sort((x, y) => x.d - y.d)
    .slice(0, limit)
    .map(({ c }) => c);
}
