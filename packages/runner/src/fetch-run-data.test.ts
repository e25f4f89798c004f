import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DownloadError } from '@flexhelm/downloads';
import { constructRunSpecs, parseObjectSpec } from '@flexhelm/run-spec';
import { fetchRunData } from './fetch-run-data.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-fetch-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const specs = (description: string) => constructRunSpecs(parseObjectSpec(description));

describe('fetchRunData', () => {
  it('reports a dataset missing offline, naming where to put it, and touches no file outside the output folder', async () => {
    const outputPath = join(root, 'out');
    const dataDir = join(root, 'data', 'scenarios');
    const failure = fetchRunData(specs('mmlu:subject=anatomy,model=text'), { outputPath, suite: 'v1', dataDir, offline: true });
    await expect(failure).rejects.toBeInstanceOf(DownloadError);
    await expect(failure).rejects.toThrow(/offline/i);
    await expect(failure).rejects.toThrow(new RegExp(join(dataDir, 'mmlu').replaceAll('/', '\\/')));
    expect(existsSync(join(outputPath, 'runs'))).toBe(false);
  });

  it('reads a generated scenario with no download', async () => {
    await expect(fetchRunData(specs('synthetic_reasoning:mode=induction,model=text'), { outputPath: join(root, 'out-b'), suite: 'v1', offline: true })).resolves.toBeUndefined();
  });
});
