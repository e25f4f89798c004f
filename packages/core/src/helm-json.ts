import { pyJsonDumps, type PyJsonValue } from '@flexhelm/python-compat';

/**
 * HELM's `json.dumps(asdict_without_nones(x), indent=2)`: how every one of HELM's five output files is written.
 * flexhelm data-model objects are built in dataclass field order with `undefined` for None, so this is a direct dump.
 */
export function helmJson(value: unknown): string {
  return pyJsonDumps(value as PyJsonValue, 2);
}
