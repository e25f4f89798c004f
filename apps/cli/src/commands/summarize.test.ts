import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-summarize-'));
const modelDir = join(root, 'tiny');
const out = join(root, 'out');
const helmSource = process.env.FLEXHELM_HELM_SOURCE_DIR ?? fileURLToPath(new URL('../../../../../shared/helm-v0.2.1', import.meta.url));
const run = 'dyck_language_np=2:model=local_tiny-opt';

function flexhelm(args: string[], env: NodeJS.ProcessEnv = { FLEXHELM_HELM_SOURCE_DIR: helmSource }) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 240_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** stderr without HELM's WARNING lines. */
const errors = (stderr: string) => stderr.split('\n').filter((l) => l && !l.startsWith('WARNING'));

describe.skipIf(!existsSync(join(helmSource, 'src/helm/benchmark/static/schema.yaml')) && !process.env.CI)('flexhelm summarize', () => {
  beforeAll(() => {
    makeTinyOptModel(modelDir, 9);
    const r = flexhelm(['run', '-d', 'dyck_language:num_parenthesis_pairs=2', '-m', '2', '--output-path', out, '--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '-t', '1']);
    expect(r.status, r.stderr).toBe(0);
  }, 300_000);

  it("writes HELM's summary files, then the markdown table", () => {
    const r = flexhelm(['summarize', '--suite', 'v1', '-o', out]);
    expect(r.status, r.stderr).toBe(0);
    for (const f of ['summary.json', 'runs.json', 'run_specs.json', 'groups.json', 'groups_metadata.json', 'costs.json', 'groups/dyck_language.json', `${run}/display_predictions.json`]) {
      expect(existsSync(join(out, 'runs', 'v1', f)), f).toBe(true);
    }
    const tables = JSON.parse(readFileSync(join(out, 'runs', 'v1', 'groups', 'dyck_language.json'), 'utf8'));
    expect(tables[0].title).toBe('num_parenthesis_pairs: 2');
    // A model the schema does not know is shown by its name.
    expect(tables[0].rows[0][0].value).toBe('local/tiny-opt');
    expect(r.stdout).toContain(`## ${run}`);
    expect(errors(r.stderr)).toEqual([`wrote 46 files for 1 runs into ${out}/runs/v1`]);
  });

  it('a truncated stats.json: exit 2 and one line naming the file, no stack trace', () => {
    const copy = join(root, 'bad');
    cpSync(out, copy, { recursive: true });
    const stats = join(copy, 'runs', 'v1', run, 'stats.json');
    writeFileSync(stats, readFileSync(stats, 'utf8').slice(0, 100));
    const r = flexhelm(['summarize', '--suite', 'v1', '-o', copy]);
    expect(r.status).toBe(2);
    const lines = errors(r.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${run}/stats.json is not valid JSON`);
  });

  it("without HELM's schema.yaml and offline: says where to get it", () => {
    const r = flexhelm(['summarize', '--suite', 'v1', '-o', out, '--offline', '--data-dir', join(root, 'empty-data')], { FLEXHELM_HELM_SOURCE_DIR: '' });
    expect(r.status).toBe(2);
    expect(errors(r.stderr).join('\n')).toMatch(/schema\.yaml could not be fetched .*FLEXHELM_HELM_SOURCE_DIR/);
  });
});

describe('flexhelm summarize before any download', () => {
  it('a suite that is not there is said at once, with the suites that are, before HELM’s schema is fetched', () => {
    const output = mkdtempSync(join(tmpdir(), 'flexhelm-cli-summarize-nosuite-'));
    mkdirSync(join(output, 'runs', 'nightly'), { recursive: true });
    // No schema anywhere and downloads allowed: a schema fetch first would try the network (and retry) before this.
    const env = { FLEXHELM_HELM_SOURCE_DIR: '' };
    const r = flexhelm(['summarize', '--suite', 'nightyl', '-o', output, '--data-dir', join(output, 'no-data')], env);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`flexhelm summarize: no suite nightyl: ${join(output, 'runs', 'nightyl')} does not exist; suites there: nightly (did you mean nightly?)\n`);
    const empty = flexhelm(['summarize', '--suite', 'v1', '-o', join(output, 'nothing')], env);
    expect(empty.stderr).toMatch(/^flexhelm summarize: no suite v1: .* does not exist; `flexhelm run --suite v1 --output-path .*nothing …` writes one\n$/);
    rmSync(output, { recursive: true, force: true });
  });
});
