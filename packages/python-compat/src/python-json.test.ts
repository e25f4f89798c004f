import { describe, expect, it } from 'vitest';
import { PyFloat } from './py-float.js';
import { pyJsonDumps, pyJsonParse, pyJsonString } from './python-json.js';

describe('pyJsonDumps (json.dumps with indent=2)', () => {
  it('writes nested values as Python does', () => {
    const value = { a: 1, b: new PyFloat(1), c: [], d: {}, e: [1, 'x'], f: null, g: undefined, h: true };
    expect(pyJsonDumps(value, 2)).toBe(
      '{\n  "a": 1,\n  "b": 1.0,\n  "c": [],\n  "d": {},\n  "e": [\n    1,\n    "x"\n  ],\n  "f": null,\n  "h": true\n}',
    );
  });

  it('writes the compact form without indent', () => {
    expect(pyJsonDumps({ a: [1, 2], b: { c: 1e-5 } })).toBe('{"a": [1, 2], "b": {"c": 1e-05}}');
  });

  it('escapes like ensure_ascii=True', () => {
    expect(pyJsonString('é\u007f😀"\\\n\r\t\b\f\u0001')).toBe('"\\u00e9\\u007f\\ud83d\\ude00\\"\\\\\\n\\r\\t\\b\\f\\u0001"');
  });

  it('keeps Map key order, including integer-like keys', () => {
    const m = new Map<string, number>([['b', 1], ['1', 2], ['a', 3]]);
    expect(pyJsonDumps(m)).toBe('{"b": 1, "1": 2, "a": 3}');
  });

  it('round-trips Python output through pyJsonParse', () => {
    const text = '{\n  "z": 1.0,\n  "2": [\n    1,\n    -0.5,\n    1e-05,\n    NaN\n  ],\n  "s": "\\u00e9\\n"\n}';
    expect(pyJsonDumps(pyJsonParse(text), 2)).toBe(text);
  });

  it('rejects bad JSON with a position', () => {
    expect(() => pyJsonParse('{"a": }')).toThrow(/offset 6/);
    expect(() => pyJsonParse('[1] x')).toThrow(/trailing/);
  });
});
