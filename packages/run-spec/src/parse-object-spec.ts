import { pyParseFloat, pyParseInt, pyDict, pyError, pyFloat } from '@flexhelm/python-compat';
import { objectSpec, type ArgValue, type ObjectSpec } from '@flexhelm/core';

/**
 * A description value as HELM types it: Python `int(v)` if that parses, else `float(v)` (a PyFloat when integral),
 * else the string itself.
 */
export function parseArgValue(text: string): ArgValue {
  const asInt = pyParseInt(text);
  if (asInt !== undefined) return asInt;
  const asFloat = pyParseFloat(text);
  if (asFloat !== undefined) return pyFloat(asFloat);
  return text;
}

/** The `key=value` pairs of a description in order (duplicates kept; a dict keeps the last value at the first place). */
export function parseArgEntries(argsText: string): [string, ArgValue][] {
  return argsText.split(',').map((arg) => {
    const eq = arg.indexOf('=');
    if (eq < 0) {
      throw pyError(
        'ValueError',
        `Expected <key>=<value>, got '${arg}': every argument after the ':' must be key=value, separated by ',' ` +
          `(no empty arguments, no quoting; a value cannot contain ',')`,
      );
    }
    return [arg.slice(0, eq), parseArgValue(arg.slice(eq + 1))];
  });
}

/** Far above any real description (HELM's longest are under 200 characters); keeps hostile input cheap to refuse. */
export const MAX_DESCRIPTION_LENGTH = 10_000;

/**
 * HELM's `parse_object_spec`: `name[:key=value(,key=value)*]`. Split at the first ':', arguments at every ',',
 * each argument at its first '='. Duplicate keys: the last value wins, at the position of the first.
 */
export function parseObjectSpec(description: string): ObjectSpec {
  if (description.length > MAX_DESCRIPTION_LENGTH) {
    throw pyError(
      'ValueError',
      `the description is ${description.length} characters long; at most ${MAX_DESCRIPTION_LENGTH} are accepted ` +
        `(a description is a run-spec name and a few key=value arguments, e.g. mmlu:subject=anatomy,model=text)`,
    );
  }
  const colon = description.indexOf(':');
  if (colon < 0) return objectSpec(description, {});
  const entries = new Map<string, ArgValue>();
  for (const [key, value] of parseArgEntries(description.slice(colon + 1))) entries.set(key, value);
  return objectSpec(description.slice(0, colon), pyDict(entries));
}
