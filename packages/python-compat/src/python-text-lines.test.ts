import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pythonLines, readPythonText } from './read-python-text.js';
import { pythonTextLines } from './python-text-lines.js';

async function collect(path: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of pythonTextLines(path)) lines.push(line);
  return lines;
}

describe('pythonTextLines', () => {
  it('streams the same lines as reading the whole file (universal newlines, \\r\\n split across chunks)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'flexhelm-lines-'));
    try {
      const path = join(dir, 'a.txt');
      // Long enough for several 64 KiB read chunks, with \r\n pairs and multi-byte characters at every offset.
      const text = `${Array.from({ length: 40000 }, (_, i) => `l${i} é€${i % 3 === 0 ? '\r\n' : i % 3 === 1 ? '\r' : '\n'}`).join('')}tail`;
      await writeFile(path, text);
      expect(await collect(path)).toEqual(pythonLines(await readPythonText(path)));
      await writeFile(path, Buffer.from([0x61, 0x0a, 0xff]));
      await expect(collect(path)).rejects.toThrow(/not valid UTF-8/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
