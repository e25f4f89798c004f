/**
 * A reader for the Python literals HELM keeps its small word lists in (`NAME: Dict[str, str] = {...}`): strings,
 * numbers, lists, tuples and dicts, with comments and trailing commas. It evaluates nothing else, so a file that
 * changed shape fails loudly instead of being half-read.
 */

/** A Python literal as JS: str → string, int/float → number, list/tuple → array, dict → Map (insertion order kept). */
export type PythonLiteral = string | number | boolean | null | PythonLiteral[] | Map<string | number, PythonLiteral>;

const SIMPLE_ESCAPES: Record<string, string> = {
  '\\': '\\', "'": "'", '"': '"', n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', f: '\f', v: '\v', '\n': '',
};

class LiteralReader {
  private i: number;
  constructor(private readonly src: string, start: number, private readonly what: string) {
    this.i = start;
  }

  private fail(problem: string): never {
    const line = this.src.slice(0, this.i).split('\n').length;
    throw new SyntaxError(`cannot read ${this.what} (line ${line}): ${problem}`);
  }

  /** Skips spaces, newlines and `#` comments (inside brackets newlines are insignificant in Python too). */
  private skip(): void {
    for (;;) {
      const c = this.src[this.i];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\\') this.i++;
      else if (c === '#') while (this.i < this.src.length && this.src[this.i] !== '\n') this.i++;
      else return;
    }
  }

  value(): PythonLiteral {
    this.skip();
    const c = this.src[this.i];
    if (c === '[') return this.sequence(']');
    if (c === '(') return this.sequence(')');
    if (c === '{') return this.dict();
    if (c === '"' || c === "'") return this.strings();
    const word = /^(-?\d+(\.\d+)?|True|False|None)/.exec(this.src.slice(this.i, this.i + 40));
    if (!word) this.fail(`unexpected ${JSON.stringify(this.src.slice(this.i, this.i + 20))}`);
    this.i += word[0].length;
    if (word[0] === 'True') return true;
    if (word[0] === 'False') return false;
    if (word[0] === 'None') return null;
    return Number(word[0]);
  }

  /** One string literal, or several adjacent ones (Python concatenates them). */
  private strings(): string {
    let out = this.string();
    for (;;) {
      const save = this.i;
      this.skip();
      if (this.src[this.i] === '"' || this.src[this.i] === "'") out += this.string();
      else {
        this.i = save;
        return out;
      }
    }
  }

  private string(): string {
    const quote = this.src[this.i]!; // called on a quote character
    if (this.src.startsWith(quote.repeat(3), this.i)) this.fail('triple-quoted strings are not expected here');
    this.i++;
    let out = '';
    for (;;) {
      const c = this.src[this.i];
      if (c === undefined || c === '\n') this.fail('unterminated string');
      this.i++;
      if (c === quote) return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.src[this.i++];
      if (e === undefined) this.fail('unterminated string');
      if (e in SIMPLE_ESCAPES) out += SIMPLE_ESCAPES[e];
      else if (e === 'x' || e === 'u' || e === 'U') {
        const len = e === 'x' ? 2 : e === 'u' ? 4 : 8;
        const hex = this.src.slice(this.i, this.i + len);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) this.fail(`bad \\${e} escape`);
        out += String.fromCodePoint(parseInt(hex, 16));
        this.i += len;
      } else out += `\\${e}`; // Python keeps unknown escapes as written.
    }
  }

  private sequence(close: string): PythonLiteral[] {
    this.i++;
    const items: PythonLiteral[] = [];
    for (;;) {
      this.skip();
      if (this.src[this.i] === close) {
        this.i++;
        return items;
      }
      items.push(this.value());
      this.skip();
      if (this.src[this.i] === ',') this.i++;
      else if (this.src[this.i] !== close) this.fail(`expected "," or "${close}"`);
    }
  }

  private dict(): Map<string | number, PythonLiteral> {
    this.i++;
    const map = new Map<string | number, PythonLiteral>();
    for (;;) {
      this.skip();
      if (this.src[this.i] === '}') {
        this.i++;
        return map;
      }
      const key = this.value();
      if (typeof key !== 'string' && typeof key !== 'number') this.fail('only str and int dict keys are supported');
      this.skip();
      if (this.src[this.i++] !== ':') this.fail('expected ":" after a dict key');
      map.set(key, this.value()); // a repeated key keeps its first position and takes the last value, as in Python
      this.skip();
      if (this.src[this.i] === ',') this.i++;
      else if (this.src[this.i] !== '}') this.fail('expected "," or "}"');
    }
  }
}

/** Parses one Python literal expression. */
export function parsePythonLiteral(text: string, what = 'Python literal'): PythonLiteral {
  return new LiteralReader(text, 0, what).value();
}

/**
 * The literal assigned to the module-level name `name` in Python `source` (`NAME = …` or `NAME: Type = …` at the
 * start of a line). Throws if the assignment is missing.
 */
export function extractPythonAssignment(source: string, name: string, what = name): PythonLiteral {
  const m = new RegExp(`^${name}[ \\t]*(?::[^=\\n]*)?=[ \\t]*`, 'm').exec(source);
  if (!m) throw new SyntaxError(`cannot read ${what}: no assignment to ${name} found`);
  return new LiteralReader(source, m.index + m[0].length, what).value();
}
