import { HelmError } from './helm-error.js';
import { PandasFrame, type PandasCell, type PandasColumn } from './pandas-csv.js';

function keyOf(cell: PandasCell): string {
  if (cell === null || (typeof cell === 'number' && Number.isNaN(cell))) return 'nan';
  if (typeof cell === 'bigint' || typeof cell === 'number') return `n:${Number(cell)}`;
  if (typeof cell === 'boolean') return `n:${cell ? 1 : 0}`;
  return `s:${cell}`;
}

/**
 * pandas 1.5's `pd.merge(left, right, left_on=…, right_on=…, suffixes=…)` (inner join, `sort=False`): rows grouped
 * by key in order of the key's first appearance in `left`; within a key, each left row (in order) with each matching
 * right row (in order). Column names present on both sides get the suffixes; the result has a fresh 0… index.
 */
export function pandasInnerMerge(left: PandasFrame, right: PandasFrame, leftOn: string, rightOn: string, suffixes: readonly [string, string] = ['_x', '_y']): PandasFrame {
  const leftKeys = left.column(leftOn).values.map(keyOf);
  const rightKeys = right.column(rightOn).values.map(keyOf);
  const groups = new Map<string, { left: number[]; right: number[] }>();
  leftKeys.forEach((key, i) => {
    let group = groups.get(key);
    if (!group) {
      group = { left: [], right: [] };
      groups.set(key, group);
    }
    group.left.push(i);
  });
  rightKeys.forEach((key, i) => { groups.get(key)?.right.push(i); });
  const leftRows: number[] = [];
  const rightRows: number[] = [];
  for (const group of groups.values()) {
    for (const l of group.left) {
      for (const r of group.right) {
        leftRows.push(l);
        rightRows.push(r);
      }
    }
  }
  const leftNames = new Set(left.columns.map((c) => c.name));
  const rightNames = new Set(right.columns.map((c) => c.name));
  // pandas keeps a single key column only when both sides join on the same name.
  const sharedKey = leftOn === rightOn ? leftOn : undefined;
  const rename = (name: string, own: 'left' | 'right'): string => {
    if (name === sharedKey) return name;
    const other = own === 'left' ? rightNames : leftNames;
    return other.has(name) ? `${name}${own === 'left' ? suffixes[0] : suffixes[1]}` : name;
  };
  const pick = (column: PandasColumn, rows: number[], name: string): PandasColumn => ({ name, dtype: column.dtype, values: rows.map((r) => column.values[r]!) });
  const columns = [
    ...left.columns.map((c) => pick(c, leftRows, rename(c.name, 'left'))),
    ...right.columns.filter((c) => c.name !== sharedKey).map((c) => pick(c, rightRows, rename(c.name, 'right'))),
  ];
  const names = columns.map((c) => c.name);
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined) throw new HelmError('ValueError', `columns overlapping after merge: "${duplicate}"; the tables' column names clash with the merge suffixes.`);
  return new PandasFrame(
    columns,
    leftRows.map((_, i) => BigInt(i)),
  );
}
