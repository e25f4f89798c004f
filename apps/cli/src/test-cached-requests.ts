// Test helper (not built): how many requests a running `flexhelm run` has recorded in its cache so far.
import { existsSync } from 'node:fs';
import { RequestCache } from '@flexhelm/request-cache';

/**
 * Polls `cachePath` every `pollMs` until it holds at least `atLeast` requests, `stop()` says so, or 200 s pass; returns
 * the last count. A cache still being created or mid-commit is read again on the next poll.
 */
export async function waitForCachedRequests(cachePath: string, atLeast: number, pollMs: number, stop: () => boolean = () => false): Promise<number> {
  let cached = 0;
  const started = Date.now();
  while (Date.now() - started < 200_000 && !stop()) {
    await new Promise((r) => setTimeout(r, pollMs));
    if (!existsSync(cachePath)) continue;
    try {
      const c = RequestCache.open(cachePath);
      cached = c.count();
      c.close();
    } catch {
      continue;
    }
    if (cached >= atLeast) break;
  }
  return cached;
}
