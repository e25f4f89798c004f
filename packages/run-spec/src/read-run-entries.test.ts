import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRunEntries, readRunEntries } from './read-run-entries.js';

describe('readRunEntries', () => {
  const dir = mkdtempSync(join(tmpdir(), 'run-entries-'));
  const write = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('reads the entries of several files in order; groups stay undefined when absent', () => {
    const a = write('a.conf', 'entries: [\n  {description: "boolq:model=text", priority: 1}\n]\n');
    const b = write('b.conf', 'entries: [\n  {description: "imdb:model=text", priority: 3, groups: ["ablation_in_context"]}\n]\n');
    expect(readRunEntries([a, b])).toEqual([
      { description: 'boolq:model=text', priority: 1 },
      { description: 'imdb:model=text', priority: 3, groups: ['ablation_in_context'] },
    ]);
  });

  it('names a missing file', () => {
    expect(() => readRunEntries(join(dir, 'nope.conf'))).toThrow(/cannot read run entries from .*nope\.conf: no such file/);
  });

  it('reports the entry and its line for a bad field', () => {
    const text = 'entries: [\n  {description: "boolq", priority: 1}\n  {description: "mmlu", priority: "high"}\n]';
    expect(() => parseRunEntries(text, 'x.conf')).toThrow(/^x\.conf:3: entries\[1\]: priority: priority must be an integer/);
    expect(() => parseRunEntries('entries: [ {priority: 1} ]', 'y.conf')).toThrow(/y\.conf:1: entries\[0\]: description: description must be a string/);
    expect(() => parseRunEntries('entries: [ {description: "a", priority: 1.5} ]')).toThrow(/priority must be an integer/);
    expect(() => parseRunEntries('entries: [ "boolq" ]')).toThrow(/each entry must be an object/);
    expect(() => parseRunEntries('runs: []', 'z.conf')).toThrow(/z\.conf: the file must have an `entries: \[...\]` list/);
  });
});
