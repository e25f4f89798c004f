import { pyStrip } from '@flexhelm/core';

/** Python's `int(text)` for a decimal string (surrounding whitespace and `_` separators allowed); undefined if invalid. */
export function pyInt(text: string): number | undefined {
  const t = pyStrip(text);
  return /^[+-]?\d+(_\d+)*$/.test(t) ? Number(t.replaceAll('_', '')) : undefined;
}
