import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './readme-blocks.js';

const DOC = 'docs/environment.md';
const NAME = /FLEXHELM_[A-Z0-9_]+/g;

/** Every tracked or new (not ignored) file but the list itself and the changesets (history, not sources). */
function sourceFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
  return [...new Set(out.split('\0'))].filter((f) => f !== '' && f !== DOC && !f.startsWith('.changeset/'));
}

/** The FLEXHELM_* names each file mentions (binary files and files deleted from the work tree are skipped). */
function namesInSources(): Map<string, string> {
  const firstSeen = new Map<string, string>();
  for (const file of sourceFiles()) {
    let text: string;
    try {
      text = readFileSync(join(repoRoot, file), 'utf8');
    } catch {
      continue; // listed by git but removed from the work tree
    }
    if (text.includes('\0')) continue;
    for (const m of text.matchAll(NAME)) if (!firstSeen.has(m[0])) firstSeen.set(m[0], file);
  }
  return firstSeen;
}

/** The names the list documents: the first cell of its table rows. */
function namesInDoc(): Set<string> {
  const rows = readFileSync(join(repoRoot, DOC), 'utf8').split('\n').map((l) => /^\|\s*`(FLEXHELM_[A-Z0-9_]+)`\s*\|/.exec(l)?.[1]);
  return new Set(rows.filter((n): n is string => n !== undefined));
}

describe(DOC, () => {
  const used = namesInSources();
  const listed = namesInDoc();

  it('lists every FLEXHELM_* environment switch and build macro the sources use', () => {
    // `FLEXHELM_SKINNY_*` in prose is a prefix: covered when a listed name starts with it.
    const missing = [...used].filter(([name]) => (name.endsWith('_') ? ![...listed].some((l) => l.startsWith(name)) : !listed.has(name)));
    expect(missing.map(([name, file]) => `${name} (first seen in ${file}): add a row to ${DOC}`)).toEqual([]);
  });

  it('lists no name the sources no longer use', () => {
    expect([...listed].filter((name) => !used.has(name)).map((name) => `${name}: not in the sources any more; remove its row from ${DOC}`)).toEqual([]);
  });

  it('is linked from the root README', () => {
    expect(readFileSync(join(repoRoot, 'README.md'), 'utf8')).toContain('](docs/environment.md)');
  });
});
