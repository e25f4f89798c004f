import { createHash } from 'node:crypto';
import type { Instance } from '@flexhelm/core';

function sortedCompactJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedCompactJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${sortedCompactJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * sha256 of `"\n".join(json.dumps(asdict(i), sort_keys=True, separators=(",", ":")))` over instances holding only
 * input, references and split: the digest the expected values in these tests were computed with, by running HELM
 * 0.2.1's generator modules under Python 3.11 / numpy's legacy RandomState.
 */
export function instanceDigest(instances: readonly Instance[]): string {
  const lines = instances.map((i) => sortedCompactJson({ input: i.input, references: i.references, split: i.split }));
  return createHash('sha256').update(lines.join('\n'), 'utf8').digest('hex');
}
