import { parsePythonCsv } from './python-csv.js';

/**
 * Python's `csv.DictReader(lines)`: the first row names the fields; blank rows are skipped; a short row leaves its
 * missing fields `undefined` (Python's `None`), extra values go under `restKey` (Python's `None` key, here `"__rest__"`).
 */
export function parsePythonCsvDicts(lines: readonly string[]): Map<string, string | undefined | string[]>[] {
  const rows = parsePythonCsv(lines).filter((row) => row.length > 0);
  if (rows.length === 0) return [];
  const [header, ...body] = rows as [string[], ...string[][]]; // not empty, checked above
  return body.map((row) => {
    const record = new Map<string, string | undefined | string[]>();
    header.forEach((name, i) => { record.set(name, row[i]); });
    if (row.length > header.length) record.set('__rest__', row.slice(header.length));
    return record;
  });
}
