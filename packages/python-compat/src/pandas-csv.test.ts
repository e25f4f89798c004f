import { describe, expect, it } from 'vitest';
import { pandasStr, readPandasCsv, tokenizePandasCsv } from './pandas-csv.js';

const rowsAsStr = (text: string) => {
  const frame = readPandasCsv(text);
  return Array.from({ length: frame.length }, (_, i) => [...frame.row(i).values()].map(pandasStr));
};

// Expected values printed by pandas 1.5.3 (`str()` of each `iterrows()` cell, `df.columns`, `df.dtypes`).
describe('readPandasCsv', () => {
  it('infers dtypes, NaN, header names and prints cells as pandas', () => {
    const text = 'a,b,c,d,e,,b\n1, 2 ,x,True,1e3,NA,-inf\n3,,"y, z",false,.5,,7\n\n  \n5,4,007,TRUE,5.,null\n';
    const frame = readPandasCsv(text);
    expect(frame.columns.map((c) => c.name)).toEqual(['a', 'b', 'c', 'd', 'e', 'Unnamed: 5', 'b.1']);
    expect(frame.columns.map((c) => c.dtype)).toEqual(['int64', 'float64', 'object', 'bool', 'float64', 'float64', 'float64']);
    expect(rowsAsStr(text)).toEqual([
      ['1', '2.0', 'x', 'True', '1000.0', 'nan', '-inf'],
      ['3', 'nan', 'y, z', 'False', '0.5', 'nan', '7.0'],
      ['5', '4.0', '007', 'True', '5.0', 'nan', 'nan'],
    ]);
    const some = readPandasCsv(text, { keepColumns: ['e', 'c', 'missing'] });
    expect(some.columns.map((c) => `${c.name}:${c.dtype}`)).toEqual(['c:object', 'e:float64']);
    expect(some.columns[1]!.values).toEqual([1000, 0.5, 5]);
  });

  it('takes the leading extra fields of a long first row as the (implicit) index; an empty frame is object', () => {
    const frame = readPandasCsv('x,y\n7,a,1\n8,b\n');
    expect(frame.columns.map((c) => `${c.name}:${c.dtype}`)).toEqual(['x:object', 'y:float64']);
    expect(rowsAsStr('x,y\n7,a,1\n8,b\n')).toEqual([
      ['a', '1.0'],
      ['b', 'nan'],
    ]);
    expect(readPandasCsv('x,y\n').columns.map((c) => c.dtype)).toEqual(['object', 'object']);
  });

  it('infers 4096-row chunks of a 128-column file separately and joins them as numpy (low_memory)', () => {
    const rows = Array.from({ length: 4200 }, (_, i) => {
      const late = i >= 4096;
      return [i === 4100 ? 'abc' : String(i), late ? '2.5' : '1', late ? '7' : 'True', ...Array<string>(125).fill('0')].join(',');
    });
    const text = `${Array.from({ length: 128 }, (_, i) => `c${i}`).join(',')}\n${rows.join('\n')}\n`;
    const frame = readPandasCsv(text);
    // pandas 1.5.3: dtypes [object, float64, int64]; row 0 prints 0, 1.0, 1; row 4100 abc, 2.5, 7.
    expect(frame.columns.slice(0, 3).map((c) => c.dtype)).toEqual(['object', 'float64', 'int64']);
    expect([0, 4095, 4096, 4100].map((i) => frame.columns.slice(0, 3).map((c) => pandasStr(c.values[i]!)))).toEqual([
      ['0', '1.0', '1'],
      ['4095', '1.0', '1'],
      ['4096', '2.5', '7'],
      ['abc', '2.5', '7'],
    ]);
  });

  it('upcasts ints to floats in rows of an all-numeric frame (iterrows)', () => {
    expect(rowsAsStr('x,y\n1,2.5\n3,4\n')).toEqual([
      ['1.0', '2.5'],
      ['3.0', '4.0'],
    ]);
  });

  it('tokenizes quotes like the C parser and refuses rows longer than the header', () => {
    expect(tokenizePandasCsv('"a""b","c\r\nd",e"f"\r"x"y,\n').map((r) => r.fields)).toEqual([['a"b', 'c\r\nd', 'e"f"'], ['xy', '']]);
    expect(() => readPandasCsv('a,b\n1,2\n1,2,3\n')).toThrow(/Expected 2 fields in line 3, saw 3/);
    // A blank line ended by a lone \r swallows a delimiter right after it (the C tokenizer's EAT_CRNL_NOP).
    expect(rowsAsStr('x,y,z\n2, ,\n\r,a2 2,')).toEqual([
      ['2', ' ', 'nan'],
      ['a2 2', 'nan', 'nan'],
    ]);
    expect(() => readPandasCsv('a\n"open\n')).toThrow(/EOF inside string/);
  });
});
