import { UsageError } from './usage-error.js';

/** An integer option value (`--priority 2`), or undefined when the option is absent. */
export function integerOption(value: unknown, flag: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value).trim();
  if (!/^[+-]?\d+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--${flag} must be an integer ≥ ${min}, got '${String(value)}'`);
  }
  return Number(text);
}

/** A repeatable list option; each value may also hold several comma-separated items (`--models-to-run a,b`). */
export function listOption(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const items = (value as string[]).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v.length > 0);
  return items;
}
