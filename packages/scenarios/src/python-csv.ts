/** The largest field Python's csv module accepts by default (`csv.field_size_limit()`). */
const FIELD_LIMIT = 131072;

const enum State {
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
  const rows: string[][] = [];
  let fields: string[] = [];
  let field = '';
  let fieldLength = 0;
  let state = State.StartRecord;
  let lineNumber = 0;

  const saveField = () => {
    fields.push(field);
    field = '';
    fieldLength = 0;
  };
  const addChar = (c: string) => {
    if (++fieldLength > fieldLimit) throw new Error(`csv field larger than field limit (${fieldLimit}) on line ${lineNumber}`);
    field += c;
  };
  const isLineEnd = (c: string | typeof EOL) => c === EOL || c === '\n' || c === '\r';

  const processChar = (c: string | typeof EOL): void => {
    switch (state) {
      case State.StartRecord:
        if (c === EOL) return;
        if (c === '\n' || c === '\r') {
          state = State.EatCrnl;
          return;
        }
        state = State.StartField;
        processChar(c);
        return;
      case State.StartField:
        if (isLineEnd(c)) {
          saveField();
          state = c === EOL ? State.StartRecord : State.EatCrnl;
        } else if (c === '"') state = State.InQuotedField;
        else if (c === delimiter) saveField();
        else {
          addChar(c);
          state = State.InField;
        }
        return;
      case State.InField:
        if (isLineEnd(c)) {
          saveField();
          state = c === EOL ? State.StartRecord : State.EatCrnl;
        } else if (c === delimiter) {
          saveField();
          state = State.StartField;
        } else addChar(c);
        return;
      case State.InQuotedField:
        if (c === EOL) return;
        if (c === '"') state = State.QuoteInQuotedField;
        else addChar(c);
        return;
      case State.QuoteInQuotedField:
        if (c === '"') {
          addChar('"');
          state = State.InQuotedField;
        } else if (c === delimiter) {
          saveField();
          state = State.StartField;
        } else if (isLineEnd(c)) {
          saveField();
          state = c === EOL ? State.StartRecord : State.EatCrnl;
        } else {
          addChar(c);
          state = State.InField;
        }
        return;
      case State.EatCrnl:
        if (c === '\n' || c === '\r') return;
        if (c === EOL) {
          state = State.StartRecord;
          return;
        }
        throw new Error(`csv: new-line character seen in unquoted field on line ${lineNumber}`);
    }
  };

  for (const line of lines) {
    lineNumber++;
    if (line.includes('\0')) throw new Error(`csv: line ${lineNumber} contains NUL`);
    for (const c of line) processChar(c);
    processChar(EOL);
    if (state === State.StartRecord) {
      rows.push(fields);
      fields = [];
    }
  }
  // End of data inside a record: CPython keeps it only if a field was being built or a quote was open.
  if (state !== State.StartRecord && (fieldLength !== 0 || state === State.InQuotedField)) {
    saveField();
    rows.push(fields);
  }
  return rows;
}

/**
 * One row as Python's `csv.writer(f).writerow(fields)` writes it (excel dialect, QUOTE_MINIMAL, `\r\n` line end):
 * fields holding `,`, `"`, `\r` or `\n` are quoted with doubled quotes; a row of one empty field is `""`.
 */
export function formatPythonCsvRow(fields: readonly string[]): string {
  if (fields.length === 1 && fields[0] === '') return '""\r\n';
  return `${fields.map((f) => (/[,"\r\n]/.test(f) ? `"${f.replaceAll('"', '""')}"` : f)).join(',')}\r\n`;
}
