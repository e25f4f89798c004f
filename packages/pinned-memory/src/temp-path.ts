import { basename, dirname, join } from 'node:path';

let counter = 0;

/** A hidden sibling of `path` for write-then-rename (same directory, so the rename stays on one filesystem). */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.tmp-${process.pid}-js${counter++}`);
}
