import { homedir, tmpdir } from 'node:os';
import { resolve, sep } from 'node:path';

/** A folder and how clients see it: `''` for the output folder (paths become relative to it), or a placeholder. */
export interface ShownRoot {
  dir: string;
  as: string;
}

/**
 * `text` with the server's absolute folders replaced, so job records and error messages never show where the server
 * keeps its files: paths under the output folder become relative to it, other known folders a placeholder such as
 * `<data-dir>`; the home and temp folders last, so the most specific root wins.
 */
export function relativePaths(text: string, roots: ShownRoot[]): string {
  const all = [...roots, { dir: tmpdir(), as: '<tmp>' }, { dir: homedir(), as: '~' }]
    .filter((r) => r.dir)
    .map((r) => ({ dir: resolve(r.dir), as: r.as }))
    .filter((r) => r.dir !== sep)
    .sort((a, b) => b.dir.length - a.dir.length);
  let out = text;
  for (const { dir, as } of all) {
    out = out.split(dir + sep).join(as ? `${as}/` : '');
    out = out.split(dir).join(as || '.');
  }
  return out;
}
