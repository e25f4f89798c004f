import { describe, expect, it } from 'vitest';
import { extractPythonAssignment, parsePythonLiteral } from './python-literal.js';

describe('Python literal reader', () => {
  it('reads dicts, lists and tuples with comments, escapes and trailing commas', () => {
    const source = `
import re

PAIRS: List[Tuple[str, ...]] = [
    # a comment with "quotes" and 'apostrophes'
    ("can't", 'won\\'t'),  # trailing comment
    ("a\\tb", "x" "y"),
]
MAP: Dict[str, str] = {
    "I'd": "I would",
    'x': "a\\u00e9",
    "x": "last wins",
}
PLAIN = [1, -2, 3.5, True, None]
`;
    expect(extractPythonAssignment(source, 'PAIRS')).toEqual([
      ["can't", "won't"],
      ['a\tb', 'xy'],
    ]);
    const map = extractPythonAssignment(source, 'MAP') as Map<string, string>;
    expect([...map.entries()]).toEqual([
      ["I'd", 'I would'],
      ['x', 'last wins'],
    ]);
    expect(extractPythonAssignment(source, 'PLAIN')).toEqual([1, -2, 3.5, true, null]);
  });

  it('fails clearly on missing names and malformed literals', () => {
    expect(() => extractPythonAssignment('X = 1', 'Y')).toThrow(/no assignment to Y/);
    expect(() => parsePythonLiteral('["a", "b"', 'test list')).toThrow(/cannot read test list/);
    expect(() => parsePythonLiteral('{"a": f(x)}')).toThrow(/unexpected/);
    expect(() => parsePythonLiteral('"""doc"""')).toThrow(/triple-quoted/);
  });
});
