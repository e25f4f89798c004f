import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-serve-results-'));

describe('flexhelm serve-results', () => {
  it('serves a folder of runs until SIGTERM, then exits 0', async () => {
    const out = join(root, 'out');
    mkdirSync(join(out, 'runs', 'v1'), { recursive: true });
    writeFileSync(join(out, 'runs', 'v1', 'run_specs.json'), '[]');
    const child = spawn(process.execPath, [main, 'serve-results', '--output-path', out, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString();
        const m = /serve-results: (http:\/\/\S+)\/results\//.exec(stderr);
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
    const suites = (await (await fetch(`${url}/v1/results/suites`)).json()) as { data: string[] };
    expect(suites.data).toEqual(['v1']);
    const suite = (await (await fetch(`${url}/v1/results/suites/v1`)).json()) as { runs: unknown[] };
    expect(suite.runs).toEqual([]);
    expect((await fetch(`${url}/`, { redirect: 'manual' })).headers.get('location')).toBe('/results/');
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 30_000);

  it('refuses a missing output folder and an unsafe bind with exit status 2', () => {
    const missing = spawnSync(process.execPath, [main, 'serve-results', '--output-path', join(root, 'nope')], { encoding: 'utf8' });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain(`no output folder ${join(root, 'nope')}: give --output-path the folder that holds runs/<suite>/`);
    const open = spawnSync(process.execPath, [main, 'serve-results', '--output-path', root, '--host', '0.0.0.0'], { encoding: 'utf8', env: { ...process.env, FLEXHELM_API_KEY: '' } });
    expect(open.status).toBe(2);
    expect(open.stderr).toContain('refusing to bind 0.0.0.0 without an API key');
    const port = spawnSync(process.execPath, [main, 'serve-results', '--port', 'x'], { encoding: 'utf8' });
    expect(port.status).toBe(2);
    expect(port.stderr).toContain("--port must be an integer ≥ 0, got 'x'");
  });
});
