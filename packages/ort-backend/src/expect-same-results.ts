import { expect } from 'vitest';
import type { GenerationResult } from '@flexhelm/engine';

/** Generated ids must match exactly; every logprob (generated, echoed, top alternatives) within `tolerance`. */
export function expectSameResults(shared: GenerationResult[], unshared: GenerationResult[], tolerance: number): void {
  expect(shared.length).toBe(unshared.length);
  shared.forEach((r, i) => {
    const u = unshared[i]!;
    expect(r.completions.length).toBe(u.completions.length);
    r.completions.forEach((c, k) => {
      const d = u.completions[k]!;
      expect(c.tokens.map((t) => t.id)).toEqual(d.tokens.map((t) => t.id));
      expect(c.finishReason).toBe(d.finishReason);
      expect(c.promptTokens?.map((t) => t.id)).toEqual(d.promptTokens?.map((t) => t.id));
      const pairs = [...c.tokens.map((t, j) => [t, d.tokens[j]!] as const), ...(c.promptTokens ?? []).map((t, j) => [t, d.promptTokens![j]!] as const)];
      for (const [a, b] of pairs) {
        if (b.logprob === null) expect(a.logprob).toBeNull();
        else expect(Math.abs(a.logprob! - b.logprob)).toBeLessThanOrEqual(tolerance);
        expect(a.top.map((t) => t.id)).toEqual(b.top.map((t) => t.id));
        for (const [j, t] of a.top.entries()) expect(Math.abs(t.logprob - b.top[j]!.logprob)).toBeLessThanOrEqual(tolerance);
      }
    });
  });
}
