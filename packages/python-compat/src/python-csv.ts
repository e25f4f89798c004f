/** The largest field Python's csv module accepts by default (`csv.field_size_limit()`). */
const FIELD_LIMIT = 131072;

enum State {
  StartRecord,
  StartField,
  InField,
  InQuotedField,
  QuoteInQuotedField,
  EatCrnl,
}

const EOL = -1;

/**
 * Python's `csv.reader(lines)` with the default `excel` dialect (delimiter `,`, quote `"`, doubled quotes, not strict),
 * fed with the lines of a text file (see `pythonLines`). Rows come out exactly as CPython's `_csv` state machine
 * builds them, including its lenient cases: a blank line is `[]`, `"a"b` is `ab`, a quote inside an unquoted field is
 * kept, and a quoted field still open at the end of the data ends there. `fieldLimit` is `csv.field_size_limit()`.
 */
export function parsePythonCsv(lines: readonly string[], delimiter = ',', fieldLimit = FIELD_LIMIT): string[][] {
  const parser = new PythonCsvParser(delimiter, fieldLimit);
  const rows: string[][] = [];
  for (const line of lines) {
    const row = parser.feedLine(line);
    if (row) rows.push(row);
  }
  const last = parser.finish();
  if (last) rows.push(last);
  return rows;
}

/** `parsePythonCsv` one line at a time, for files too large to hold as one string. */
export class PythonCsvParser {
  private fields: string[] = [];
  private field = '';
  private fieldLength = 0;
  private state = State.StartRecord;
  private lineNumber = 0;

  constructor(
    private readonly delimiter = ',',
    private readonly fieldLimit = FIELD_LIMIT,
  ) {}

  /** Feeds one line (with its `\n`); returns the row it completes, if any. */
  feedLine(line: string): string[] | undefined {
    this.lineNumber++;
    if (line.includes('\0')) throw new Error(`csv: line ${this.lineNumber} contains NUL`);
    for (const c of line) this.processChar(c);
    this.processChar(EOL);
    if (this.state !== State.StartRecord) return undefined;
    const row = this.fields;
    this.fields = [];
    return row;
  }

  /** End of data inside a record: CPython keeps it only if a field was being built or a quote was open. */
  finish(): string[] | undefined {
    if (this.state !== State.StartRecord && (this.fieldLength !== 0 || this.state === State.InQuotedField)) {
      this.saveField();
      const row = this.fields;
      this.fields = [];
      this.state = State.StartRecord;
      return row;
    }
    return undefined;
  }

  private saveField(): void {
    this.fields.push(this.field);
    this.field = '';
    this.fieldLength = 0;
  }

  private addChar(c: string): void {
    if (++this.fieldLength > this.fieldLimit) throw new Error(`csv field larger than field limit (${this.fieldLimit}) on line ${this.lineNumber}`);
    this.field += c;
  }

  private processChar(c: string | typeof EOL): void {
    const isLineEnd = c === EOL || c === '\n' || c === '\r';
    switch (this.state) {
      case State.StartRecord:
        if (c === EOL) return;
        if (c === '\n' || c === '\r') {
          this.state = State.EatCrnl;
          return;
        }
        this.state = State.StartField;
        this.processChar(c);
        return;
      case State.StartField:
        if (isLineEnd) {
          this.saveField();
          this.state = c === EOL ? State.StartRecord : State.EatCrnl;
        } else if (c === '"') this.state = State.InQuotedField;
        else if (c === this.delimiter) this.saveField();
        else {
          this.addChar(c);
          this.state = State.InField;
        }
        return;
      case State.InField:
        if (isLineEnd) {
          this.saveField();
          this.state = c === EOL ? State.StartRecord : State.EatCrnl;
        } else if (c === this.delimiter) {
          this.saveField();
          this.state = State.StartField;
        } else this.addChar(c);
        return;
      case State.InQuotedField:
        if (c === EOL) return;
        if (c === '"') this.state = State.QuoteInQuotedField;
        else this.addChar(c);
        return;
      case State.QuoteInQuotedField:
        if (c === '"') {
          this.addChar('"');
          this.state = State.InQuotedField;
        } else if (c === this.delimiter) {
          this.saveField();
          this.state = State.StartField;
        } else if (isLineEnd) {
          this.saveField();
          this.state = c === EOL ? State.StartRecord : State.EatCrnl;
        } else {
          this.addChar(c);
          this.state = State.InField;
        }
        return;
      case State.EatCrnl:
        if (c === '\n' || c === '\r') return;
        if (c === EOL) {
          this.state = State.StartRecord;
          return;
        }
        throw new Error(`csv: new-line character seen in unquoted field on line ${this.lineNumber}`);
    }
  }
}

/**
 * One row as Python's `csv.writer(f).writerow(fields)` writes it (excel dialect, QUOTE_MINIMAL, `\r\n` line end):
 * fields holding `,`, `"`, `\r` or `\n` are quoted with doubled quotes; a row of one empty field is `""`.
 */
export function formatPythonCsvRow(fields: readonly string[]): string {
  if (fields.length === 1 && fields[0] === '') return '""\r\n';
  return `${fields.map((f) => (/[,"\r\n]/.test(f) ? `"${f.replaceAll('"', '""')}"` : f)).join(',')}\r\n`;
}
