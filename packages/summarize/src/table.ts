import { formatPyNumber, PyFloat, type PyJsonValue, type PyNumber } from '@flexhelm/python-compat';

/** A cell's semantic value: a number (sortable), a string, or None (`undefined`). */
export type CellValue = PyNumber | string | undefined;

/** HELM 0.2.1 `Cell`. Keys are written in this (dataclass) order; `undefined` fields are omitted. */
export interface Cell {
  value?: CellValue;
  display_value?: string;
  description?: string;
  href?: string;
  style?: Record<string, string>;
  markdown: boolean;
  contamination_level?: string;
}

/** HELM 0.2.1 `HeaderCell(Cell)`: `lower_is_better` (None: not comparable) and `metadata` for plots. */
export interface HeaderCell extends Cell {
  lower_is_better?: boolean;
  metadata: Record<string, string>;
}

export interface Hyperlink {
  text: string;
  href: string;
}

/** HELM 0.2.1 `Table`. */
export interface Table {
  title: string;
  header: HeaderCell[];
  rows: Cell[][];
  links: Hyperlink[];
  name?: string;
  description?: string;
}

/** `Cell(value, description=..., ...)`. */
export function cell(value: CellValue, fields: Omit<Partial<Cell>, 'value'> = {}): Cell {
  return {
    value,
    display_value: fields.display_value,
    description: fields.description,
    href: fields.href,
    style: fields.style,
    markdown: fields.markdown ?? false,
    contamination_level: fields.contamination_level,
  };
}

/** `HeaderCell(value, description=..., lower_is_better=..., metadata=...)`. */
export function headerCell(value: string, fields: { description?: string; lower_is_better?: boolean; metadata?: Record<string, string> } = {}): HeaderCell {
  return { ...cell(value, { description: fields.description }), lower_is_better: fields.lower_is_better, metadata: fields.metadata ?? {} };
}

export function table(title: string, header: HeaderCell[], rows: Cell[][], fields: { links?: Hyperlink[]; name?: string } = {}): Table {
  return { title, header, rows, links: fields.links ?? [], name: fields.name, description: undefined };
}

function cellToPy(c: Cell | HeaderCell): PyJsonValue {
  // Key order of HELM's dataclasses; `undefined` members are dropped by the JSON writer (asdict_without_nones).
  const out: Record<string, PyJsonValue> = {
    value: c.value,
    display_value: c.display_value,
    description: c.description,
    href: c.href,
    style: c.style,
    markdown: c.markdown,
    contamination_level: c.contamination_level,
  };
  if ('metadata' in c) {
    out.lower_is_better = c.lower_is_better;
    out.metadata = c.metadata;
  }
  return out;
}

/** `asdict_without_nones(table)`, ready for `helmJson`. */
export function tableToPy(t: Table): PyJsonValue {
  return {
    title: t.title,
    header: t.header.map(cellToPy),
    rows: t.rows.map((row) => row.map(cellToPy)),
    links: t.links.map((l) => ({ text: l.text, href: l.href })),
    name: t.name,
    description: t.description,
  };
}

/** Python's `str(value)` of a cell value. */
function pyStrValue(value: CellValue): string {
  if (value === undefined) return 'None';
  return typeof value === 'string' ? value : formatPyNumber(value);
}

/** Python truthiness of a cell value (`0`, `0.0` and `""` are false). */
function truthy(value: CellValue): boolean {
  if (value === undefined) return false;
  if (value instanceof PyFloat) return value.value !== 0;
  return typeof value === 'string' ? value.length > 0 : value !== 0;
}

/** HELM's `table_to_latex(table, table_name)` (blank columns skipped), byte for byte. */
export function tableToLatex(t: Table, tableName: string): string {
  const shown = t.header.map((_, i) => i).filter((i) => !t.rows.every((row) => row[i]!.value === undefined));
  const lines = [
    '\\begin{table*}[htp]',
    '\\resizebox{\\textwidth}{!}{',
    `\\begin{tabular}{l${'r'.repeat(Math.max(0, shown.length - 1))}}`,
    '\\toprule',
    `${shown.map((i) => pyStrValue(t.header[i]!.value)).join(' & ')} \\\\`,
    '\\midrule',
  ];
  for (const row of t.rows) {
    // `row[i].display_value or row[i].value or ""`: a zero value prints as an empty cell, as in HELM.
    lines.push(`${shown.map((i) => { const c = row[i]!; return c.display_value || (truthy(c.value) ? pyStrValue(c.value) : ''); }).join(' & ')} \\\\`);
  }
  lines.push('\\bottomrule', '\\end{tabular}}', `\\caption{Results for ${tableName}}`, `\\label{fig:${tableName}}`, '\\end{table*}');
  return lines.join('\n').replaceAll('%', '\\%');
}
