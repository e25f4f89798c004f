import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeModel } from '@flexhelm/engine';
import { writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import { post } from './test-server.js';

const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-server-main-'));
const modelDir = join(root, 'tiny');
const common = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '--output-path', join(root, 'out'), '--offline'];

beforeAll(() => {
  makeModel({
    config: { hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, vocabSize: 50272 },
    outDir: modelDir,
    seed: 5,
    beforeCommit: (dir) => writeOptShapedTokenizerFolder(dir),
  });
});

describe('flexhelm-server', () => {
  it('serves on the port it prints and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [main, ...common, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const guard = setTimeout(() => child.kill('SIGKILL'), 60_000); // never outlive the test
    let stderr = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
        if (m) resolve(m[1]);
      });
      child.on('exit', () => reject(new Error(`server exited early: ${stderr}`)));
    });
    const r = await post(`${url}/v1/completions`, { model: 'local/tiny-opt', prompt: 'Hello', max_tokens: 3, temperature: 0 });
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(3);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    clearTimeout(guard);
    expect(stderr).toContain('SIGTERM: finishing in-flight requests and saving jobs');
  });

  it('explains bad options and unsafe binds', () => {
    const port = spawnSync(process.execPath, [main, ...common, '--port', 'abc'], { encoding: 'utf8', timeout: 60_000 });
    expect(port.status).toBe(2);
    expect(port.stderr).toMatch(/--port must be an integer ≥ 0, got 'abc'/);
    const open = spawnSync(process.execPath, [main, ...common, '--host', '0.0.0.0'], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, FLEXHELM_API_KEY: '' } });
    expect(open.status).toBe(1);
    expect(open.stderr).toMatch(/refusing to bind 0\.0\.0\.0 without an API key.*--api-key/);
    const help = spawnSync(process.execPath, [main, '--help'], { encoding: 'utf8', timeout: 60_000 });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: flexhelm-server/);
  });
});
