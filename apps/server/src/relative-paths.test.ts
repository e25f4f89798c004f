import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { relativePaths } from './relative-paths.js';

describe('relativePaths', () => {
  const out = join(tmpdir(), 'flexhelm-x', 'out');
  const roots = [
    { dir: out, as: '' },
    { dir: '/srv/data/scenarios', as: '<data-dir>' },
  ];

  it('shows paths under the output folder relative to it, and other server folders as placeholders', () => {
    expect(relativePaths(`ENOENT: no such file, open '${out}/runs/v1/x/stats.json'`, roots)).toBe("ENOENT: no such file, open 'runs/v1/x/stats.json'");
    expect(relativePaths(`cannot write ${out}`, roots)).toBe('cannot write .');
    expect(relativePaths('missing /srv/data/scenarios/mmlu/test.csv', roots)).toBe('missing <data-dir>/mmlu/test.csv');
    expect(relativePaths(`scratch ${join(tmpdir(), 'other', 'f')}`, roots)).toBe('scratch <tmp>/other/f');
    expect(relativePaths('no path here', roots)).toBe('no path here');
  });
});
