import { readFile } from 'node:fs/promises';
import { HelmError } from './helm-error.js';
import { formatPyFloat } from './py-float.js';

/**
 * A cell as pandas 1.5 holds it after `read_csv`: `bigint` for int64 columns, `number` for float64 (NaN when missing),
 * `boolean` for bool columns, `string` for object columns (`null` is a missing object/bool cell, i.e. `nan`).
 */
export type PandasCell = bigint | number | boolean | string | null;
type PandasDtype = 'int64' | 'float64' | 'bool' | 'object';

export interface PandasColumn {
  name: string;
  dtype: PandasDtype;
  values: PandasCell[];
}

/** The subset of a pandas DataFrame the scenarios need: named, typed columns in file order, rows by position. */
export class PandasFrame {
  constructor(
    readonly columns: readonly PandasColumn[],
    /** The row labels (pandas' index): 0, 1, … or the values of `index_col`. */
    readonly index: readonly PandasCell[],
  ) {}

  get length(): number {
    return this.index.length;
  }

  column(name: string): PandasColumn {
    const column = this.columns.find((c) => c.name === name);
    if (!column) throw new HelmError('KeyError', `'${name}': the table has no column "${name}" (columns: ${this.columns.map((c) => c.name).join(', ')}).`);
    return column;
  }

  /** `df.iloc[positions]`: the same columns, the chosen rows, their index labels kept. */
  take(positions: readonly number[]): PandasFrame {
    return new PandasFrame(
      this.columns.map((c) => ({ ...c, values: positions.map((p) => c.values[p]!) })),
      positions.map((p) => this.index[p]!),
    );
  }

  /**
   * `df.iterrows()` row `position` as a name → cell map. Like pandas, a row of only int and float columns is upcast to
   * float64 (so its ints print as `1.0`); any other mix keeps each column's own cells.
   */
  row(position: number): Map<string, PandasCell> {
    if (!(Number.isInteger(position) && position >= 0 && position < this.length)) throw new RangeError(`row ${position} is outside a frame of ${this.length} rows`);
    const dtypes = new Set(this.columns.map((c) => c.dtype));
    const toFloat = dtypes.has('float64') && [...dtypes].every((d) => d === 'int64' || d === 'float64');
    return new Map(
      this.columns.map((c) => {
        const cell = c.values[position]!;
        return [c.name, toFloat && typeof cell === 'bigint' ? Number(cell) : cell];
      }),
    );
  }
}

/** `str(cell)` / `f"{cell}"` for a cell of a pandas row. */
export function pandasStr(cell: PandasCell): string {
  if (cell === null) return 'nan';
  if (typeof cell === 'bigint') return cell.toString();
  if (typeof cell === 'boolean') return cell ? 'True' : 'False';
  if (typeof cell === 'number') {
    if (Number.isNaN(cell)) return 'nan';
    if (cell === Infinity) return 'inf';
    if (cell === -Infinity) return '-inf';
    return formatPyFloat(cell);
  }
  return cell;
}

/** Whether a cell is missing (`pd.isna`). */
export function pandasIsNa(cell: PandasCell): boolean {
  return cell === null || (typeof cell === 'number' && Number.isNaN(cell));
}

/** Python's `cell >= threshold` on a numeric pandas cell (NaN compares false; a string is a TypeError, as in pandas). */
export function pandasAtLeast(cell: PandasCell, threshold: number, what: string): boolean {
  if (cell === null) return false;
  if (typeof cell === 'string') {
    throw new HelmError('TypeError', `'>=' not supported between instances of 'str' and 'float': ${what} holds text ("${cell}"), not numbers.`);
  }
  return Number(cell) >= threshold;
}

/** pandas 1.5's default `na_values` (`'None'` only joined in pandas 2.0). */
const NA_VALUES: ReadonlySet<string> = new Set([
  '',
  '#N/A',
  '#N/A N/A',
  '#NA',
  '-1.#IND',
  '-1.#QNAN',
  '-NaN',
  '-nan',
  '1.#IND',
  '1.#QNAN',
  '<NA>',
  'N/A',
  'NA',
  'NULL',
  'NaN',
  'n/a',
  'nan',
  'null',
]);

const INT_PATTERN = /^[ \t\n\v\f\r]*[+-]?\d+[ \t\n\v\f\r]*$/;
const FLOAT_PATTERN = /^[ \t\n\v\f\r]*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[ \t\n\v\f\r]*$/;
const INF_PATTERN = /^[ \t\n\v\f\r]*([+-]?)(inf|infinity)[ \t\n\v\f\r]*$/i;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TRUE_VALUES = new Set(['True', 'TRUE', 'true']);
const FALSE_VALUES = new Set(['False', 'FALSE', 'false']);

function parseFloatToken(token: string): number | undefined {
  if (FLOAT_PATTERN.test(token)) return Number(token.trim());
  const inf = INF_PATTERN.exec(token);
  if (inf) return inf[1] === '-' ? -Infinity : Infinity;
  return undefined;
}

/** pandas' C-parser dtype inference for one column: int64, else float64, else bool, else object strings. */
function inferColumn(name: string, tokens: readonly (string | undefined)[]): PandasColumn {
  if (tokens.length === 0) return { name, dtype: 'object', values: [] };
  const isNa = tokens.map((t) => t === undefined || NA_VALUES.has(t));
  const present = tokens.filter((_, i) => !isNa[i]) as string[];
  const hasNa = isNa.some(Boolean);
  if (present.every((t) => INT_PATTERN.test(t) && BigInt(t.trim()) >= INT64_MIN && BigInt(t.trim()) <= INT64_MAX)) {
    if (!hasNa && present.length > 0) return { name, dtype: 'int64', values: present.map((t) => BigInt(t.trim())) };
    // Ints with gaps (or an all-empty column) become float64 with NaN.
    return { name, dtype: 'float64', values: tokens.map((t, i) => (isNa[i] ? NaN : Number(t!.trim()))) };
  }
  const floats = present.map(parseFloatToken);
  if (floats.every((f) => f !== undefined)) {
    return { name, dtype: 'float64', values: tokens.map((t, i) => (isNa[i] ? NaN : parseFloatToken(t!)!)) };
  }
  if (present.every((t) => TRUE_VALUES.has(t) || FALSE_VALUES.has(t))) {
    return { name, dtype: hasNa ? 'object' : 'bool', values: tokens.map((t, i) => (isNa[i] ? null : TRUE_VALUES.has(t!))) };
  }
  return { name, dtype: 'object', values: tokens.map((t, i) => (isNa[i] ? null : t!)) };
}

/** The rows per chunk of pandas' default `low_memory=True` reading: the largest power of two below 2^20 / width. */
function lowMemoryChunkRows(width: number): number {
  const heuristic = Math.floor(2 ** 20 / Math.max(1, width));
  let rows = 1;
  while (rows * 2 < heuristic) rows *= 2;
  return rows;
}

/**
 * With `low_memory=True` pandas infers each chunk of rows on its own and joins the chunks with `np.concatenate`:
 * bool with int gives int64, with float float64, int with float float64, and anything with object gives object
 * holding each chunk's own cells (so a float chunk's `1` prints `1.0` there) — pandas' "mixed types" DtypeWarning.
 */
function inferChunked(name: string, tokens: readonly (string | undefined)[], chunkRows: number): PandasColumn {
  if (tokens.length <= chunkRows) return inferColumn(name, tokens);
  const chunks: PandasColumn[] = [];
  for (let start = 0; start < tokens.length; start += chunkRows) chunks.push(inferColumn(name, tokens.slice(start, start + chunkRows)));
  const dtypes = new Set(chunks.map((c) => c.dtype));
  const values = chunks.flatMap((c) => c.values);
  if (dtypes.size === 1) return { name, dtype: chunks[0]!.dtype, values };
  if (dtypes.has('object')) return { name, dtype: 'object', values };
  if (dtypes.has('float64')) return { name, dtype: 'float64', values: values.map((v) => (typeof v === 'boolean' ? (v ? 1 : 0) : Number(v))) };
  return { name, dtype: 'int64', values: values.map((v) => (typeof v === 'boolean' ? (v ? 1n : 0n) : (v as bigint))) };
}

/**
 * pandas' C tokenizer with the defaults (`sep=','`, `quotechar='"'`, doubled quotes, `skip_blank_lines=True`):
 * records of raw fields and the 1-based line each starts on. Quoted fields may hold delimiters and newlines; a quote
 * inside an unquoted field is literal; `"a"b` reads `ab`; `\n`, `\r\n` and `\r` end records; lines of only spaces and
 * tabs are skipped.
 */
export function tokenizePandasCsv(text: string, sep = ','): { fields: string[]; line: number }[] {
  const records: { fields: string[]; line: number }[] = [];
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  while (i < text.length) {
    // A blank or whitespace-only line is no record.
    let j = i;
    while (j < text.length && (text[j] === ' ' || text[j] === '\t') && text[j] !== sep) j++;
    if (j >= text.length || text[j] === '\n' || text[j] === '\r') {
      if (j >= text.length) break;
      i = j + 1;
      // The C tokenizer's EAT_CRNL_NOP: after a blank line ended by \r, a \n or a delimiter is swallowed.
      if (text[j] === '\r' && (text[i] === '\n' || text[i] === sep)) i++;
      line++;
      continue;
    }
    const startLine = line;
    const fields: string[] = [];
    let field = '';
    let quoted = false;
    let endOfRecord = false;
    while (!endOfRecord) {
      if (i >= text.length) {
        if (quoted) throw new HelmError('ValueError', `pandas.errors.ParserError: Error tokenizing data. C error: EOF inside string starting at row ${startLine - 1}: a quoted field is never closed.`);
        fields.push(field);
        break;
      }
      const c = text[i];
      if (quoted) {
        if (c === '"') {
          if (text[i + 1] === '"') {
            field += '"';
            i += 2;
          } else {
            quoted = false;
            i++;
          }
        } else {
          if (c === '\n') line++;
          else if (c === '\r' && text[i + 1] !== '\n') line++;
          field += c;
          i++;
        }
      } else if (c === '"' && field === '' && (i === 0 || text[i - 1] === sep || text[i - 1] === '\n' || text[i - 1] === '\r')) {
        quoted = true;
        i++;
      } else if (c === sep) {
        fields.push(field);
        field = '';
        i++;
      } else if (c === '\n' || c === '\r') {
        fields.push(field);
        i += c === '\r' && text[i + 1] === '\n' ? 2 : 1;
        line++;
        endOfRecord = true;
      } else {
        field += c;
        i++;
      }
    }
    records.push({ fields, line: startLine });
  }
  return records;
}

export interface ReadPandasCsvOptions {
  /** `index_col=0`: the first column becomes the row labels instead of a column. */
  indexCol0?: boolean;
  /** `header=None, names=[...]`: no header line, these column names. */
  names?: readonly string[];
  /**
   * Keep only these columns (the index column is always kept). Inference is per column, so the kept columns come out
   * as they would in the full frame; big files then hold no tokens for columns nobody reads.
   */
  keepColumns?: readonly string[];
  /** For error messages. */
  source?: string;
}

/**
 * `pd.read_csv(path)` as pandas 1.5's C parser reads a comma-separated file with default options (plus `index_col=0`
 * or `header=None, names=…`). Supported: quoting as `tokenizePandasCsv`, a leading BOM, default NA strings, per-column
 * int64/float64/bool/object inference, short rows padded with NaN, header names mangled as pandas (`Unnamed: i`,
 * duplicates `a.1`), pandas' implicit index (a first data row longer than the header: its leading extra fields
 * are the index, dropped here). Checked against pandas 1.5.3 on 3000 random small files: all agree except files mixing
 * lone `\r` line ends with blank lines, where pandas' own tokenizer misbehaves (repeated or phantom rows). Not
 * supported: other separators, encodings, thousands separators, converters and date parsing.
 */
export function readPandasCsv(text: string, options: ReadPandasCsvOptions = {}): PandasFrame {
  const source = options.source ?? 'the csv file';
  const records = tokenizePandasCsv(text);
  let header: string[];
  let data = records;
  if (options.names) {
    header = [...options.names];
  } else {
    if (records.length === 0) throw new HelmError('ValueError', `pandas.errors.EmptyDataError: No columns to parse from file: ${source} is empty.`);
    header = mangleHeader(records[0]!.fields);
    data = records.slice(1);
  }
  // pandas' implicit index: a first data row longer than the header makes its leading extra fields the index.
  const implicitIndex = !options.names && !options.indexCol0 && data.length > 0 ? Math.max(0, data[0]!.fields.length - header.length) : 0;
  header = [...Array.from({ length: implicitIndex }, (_, i) => `\0index${i}`), ...header];
  const width = header.length;
  const keep = options.keepColumns ? new Set(options.keepColumns) : undefined;
  const kept = [...header.keys()].filter((c) => c >= implicitIndex && (!keep || keep.has(header[c]!) || (c === 0 && options.indexCol0)));
  const tokens: (string | undefined)[][] = kept.map(() => []);
  for (const { fields, line } of data) {
    if (fields.length > width) {
      throw new HelmError('ValueError', `pandas.errors.ParserError: Error tokenizing data. C error: Expected ${width} fields in line ${line}, saw ${fields.length} (${source}).`);
    }
    kept.forEach((c, k) => { tokens[k]!.push(fields[c]); });
  }
  const chunkRows = lowMemoryChunkRows(width);
  const columns = kept.map((c, k) => inferChunked(header[c]!, tokens[k]!, chunkRows));
  if (options.indexCol0) {
    if (columns.length === 0) throw new HelmError('IndexError', `${source} has no column to use as the index.`);
    return new PandasFrame(columns.slice(1), columns[0]!.values);
  }
  return new PandasFrame(
    columns,
    data.map((_, i) => BigInt(i)),
  );
}

/** pandas' header mangling: empty names become `Unnamed: i`, repeats get `.1`, `.2`, … (skipping names taken). */
function mangleHeader(names: readonly string[]): string[] {
  const counts = new Map<string, number>();
  return names.map((raw, i) => {
    let name = raw === '' ? `Unnamed: ${i}` : raw;
    let count = counts.get(name) ?? 0;
    while (count > 0) {
      counts.set(name, count + 1);
      name = `${name}.${count}`;
      count = counts.get(name) ?? 0;
    }
    counts.set(name, count + 1);
    return name;
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** `pd.read_csv(path, …)`: the file as strict UTF-8 with its line endings untouched (pandas reads bytes, so a quoted `\r\n` stays). */
export async function readPandasCsvFile(path: string, options: ReadPandasCsvOptions = {}): Promise<PandasFrame> {
  let text: string;
  try {
    text = utf8.decode(await readFile(path));
  } catch (error) {
    throw new HelmError('ValueError', `UnicodeDecodeError: ${path} is not valid UTF-8 (${(error as Error).message}); the download may be damaged: delete it and run again.`);
  }
  return readPandasCsv(text, { source: path, ...options });
}
