import { describe, expect, it } from 'vitest';
import { parseHocon } from './hocon.js';

describe('parseHocon', () => {
  it('reads HELM-style conf files: comments, unquoted keys, entries without commas', () => {
    const text = [
      '# Main RunSpecs',
      'entries: [',
      '  ##### Generic #####',
      '  {description: "boolq:model=text,data_augmentation=canonical", priority: 1}  # trailing comment',
      '  // another comment style',
      '  {description: "mmlu:subject=anatomy,model=text", priority: 2, groups: ["a", "b"]}',
      ']',
    ].join('\n');
    expect(parseHocon(text)).toEqual({
      entries: [
        { description: 'boolq:model=text,data_augmentation=canonical', priority: 1 },
        { description: 'mmlu:subject=anatomy,model=text', priority: 2, groups: ['a', 'b'] },
      ],
    });
  });

  it('accepts a braced root, = separators, commas, nested objects and objects without a separator', () => {
    const text = '{\n  a = 1,\n  b: "two", c { d: [1, 2.5, true, null], e: x y }\n}\n';
    expect(parseHocon(text)).toEqual({ a: 1, b: 'two', c: { d: [1, 2.5, true, null], e: 'x y' } });
  });

  it('decodes string escapes and triple-quoted strings', () => {
    expect(parseHocon('a: "x\\ty\\u00e9\\"", b: """raw\\n"q" """')).toEqual({ a: 'x\ty\u00e9"', b: 'raw\\n"q" ' });
  });

  it('keeps # inside quoted strings', () => {
    expect(parseHocon('a: "stop=#"')).toEqual({ a: 'stop=#' });
  });

  it('merges repeated object keys and replaces repeated scalars', () => {
    expect(parseHocon('a { x: 1 }\na { y: 2 }\nb: 1\nb: 2')).toEqual({ a: { x: 1, y: 2 }, b: 2 });
  });

  it.each([
    ['entries: [\n  {description: "x", priority: 1}\n', /<hocon>:1: missing \] to close the array opened here/],
    ['a: "unterminated\n', /<hocon>:1: unterminated string/],
    ['a 1', /<hocon>:1: expected ':' or '=' after key "a"/],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a HOCON substitution, not a template
    ['a: ${b}', /substitutions/],
    ['a.b: 1', /dotted key paths are not supported/],
    ['a: 1\n}', /<hocon>:2: unexpected "}"/],
    ['\n\nentries: [ {description: "x" priority: 1} ]', /<hocon>:3: expected ',' or a newline after the value of "description"/],
    ['include "other.conf"', /include is not supported/],
  ])('%j is rejected with the line number', (text, message) => {
    expect(() => parseHocon(text)).toThrow(message);
  });
});
