import type { PyJsonValue as ArgValue } from './python-json.js';

/**
 * A Python dict as an ObjectSpec `args` value. JS objects list integer-like keys ("2", "10") first, Python dicts keep
 * insertion order, so when such a key is present the dict is a `Map` (which `pyJsonDumps` writes in order).
 */
export function pyDict(entries: Iterable<readonly [string, ArgValue]>): Record<string, ArgValue> {
  const list = [...entries];
  if (list.some(([key]) => /^(0|[1-9][0-9]*)$/.test(key) && Number(key) < 2 ** 32 - 1)) {
    return new Map(list) as unknown as Record<string, ArgValue>;
  }
  const out: Record<string, ArgValue> = {};
  for (const [key, value] of list) out[key] = value;
  return out;
}

/** The entries of a dict built by {@link pyDict} (or any plain args object), in Python order. */
export function dictEntries(dict: Record<string, ArgValue> | ReadonlyMap<string, ArgValue>): [string, ArgValue][] {
  return dict instanceof Map ? [...dict.entries()] : Object.entries(dict);
}

/** `dict(d, **{key: value})`: replaces the value in place when the key exists, appends it otherwise. */
export function dictWith(dict: Record<string, ArgValue>, key: string, value: ArgValue): Record<string, ArgValue> {
  const entries = dictEntries(dict);
  const at = entries.findIndex(([k]) => k === key);
  if (at >= 0) entries[at] = [key, value];
  else entries.push([key, value]);
  return pyDict(entries);
}
