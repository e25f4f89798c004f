import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadFile, ensureDataFile } from './data-files.js';
import { readHelmSourceFile } from './helm-word-lists.js';

let server: Server;
let base: string;
let dir: string;
let requests = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'augmentation-files-'));
  server = createServer((req, res) => {
    requests++;
    if (req.url === '/mapping.json') res.end('{"the": ["da"]}');
    else {
      res.statusCode = 404;
      res.end('missing');
    }
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((done) => server.close(done));
  await rm(dir, { recursive: true, force: true });
});

describe('data files', () => {
  it('downloads once into the target path (relative to baseDir), atomically', async () => {
    const before = requests;
    const path = await ensureDataFile(`${base}/mapping.json`, 'benchmark_output/perturbations/dialect/m.json', { baseDir: dir });
    expect(path).toBe(join(dir, 'benchmark_output/perturbations/dialect/m.json'));
    expect(await readFile(path, 'utf8')).toBe('{"the": ["da"]}');
    await ensureDataFile(`${base}/mapping.json`, 'benchmark_output/perturbations/dialect/m.json', { baseDir: dir });
    expect(requests - before).toBe(1);
    expect((await readdir(join(dir, 'benchmark_output/perturbations/dialect'))).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('reports HTTP errors and offline misses with what to do, leaving no file', async () => {
    const target = join(dir, 'gone.json');
    await expect(downloadFile({ url: `${base}/gone.json`, targetPath: target })).rejects.toThrow(/HTTP 404.*by hand/);
    await expect(downloadFile({ url: `${base}/mapping.json`, targetPath: target, offline: true })).rejects.toThrow(/offline/);
    expect(await readdir(dir)).not.toContain('gone.json');
  });

  it('accepts only HELM v0.2.1 source files (pinned hashes)', async () => {
    const fake = join(dir, 'helm');
    await rm(fake, { recursive: true, force: true });
    await mkdir(fake, { recursive: true });
    await writeFile(join(fake, 'typos_perturbation.py'), 'key_approx["q"] = "was"\n');
    await expect(readHelmSourceFile('typos_perturbation.py', { helmSourceDir: fake })).rejects.toThrow(/is not HELM v0.2.1's typos_perturbation.py/);
    await expect(readHelmSourceFile('gender_perturbation.py', { helmSourceDir: fake })).rejects.toThrow(/not in .*helm/);
  });
});
