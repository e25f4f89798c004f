import { spawnSync } from 'node:child_process';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The README's one way to put `flexhelm` on PATH after the Quick start: `npm link` in apps/cli (offline: it only links
// the built package; its dependencies resolve through the workspace). Here into a scratch prefix, not the machine's.
const cliDir = fileURLToPath(new URL('..', import.meta.url));
const prefix = mkdtempSync(join(tmpdir(), 'flexhelm-npm-link-'));
afterAll(() => rmSync(prefix, { recursive: true, force: true }));

describe('npm link in apps/cli', () => {
  it('puts a working flexhelm on PATH', () => {
    const env = { ...process.env, npm_config_prefix: prefix };
    const link = spawnSync('npm', ['link', '--offline', '--no-audit', '--no-fund'], { cwd: cliDir, env, encoding: 'utf8', timeout: 120_000 });
    expect(link.status, link.stderr).toBe(0);
    const bin = join(prefix, 'bin', 'flexhelm');
    expect(readlinkSync(bin)).toMatch(/@flexhelm\/cli\/dist\/main\.js$/);
    const path = `${join(prefix, 'bin')}${delimiter}${process.env.PATH}`;
    // Through a shell, by name, as a user types it.
    const shell = (line: string) => spawnSync('sh', ['-c', line], { env: { ...process.env, PATH: path }, encoding: 'utf8' });
    const version = shell('flexhelm --version');
    expect([version.status, version.stdout]).toEqual([0, expect.stringMatching(/^flexhelm \d+\.\d+\.\d+ \(Node /)]);
    const serve = shell('flexhelm serve --help');
    expect([serve.status, serve.stdout]).toEqual([0, expect.stringMatching(/^usage: flexhelm serve \[options\]/)]);
  }, 150_000);
});
