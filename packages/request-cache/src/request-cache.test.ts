import { PyFloat } from '@flexhelm/python-compat';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { request, requestResult, type RequestResult } from '@flexhelm/core';
import { RequestCache, RequestCacheError, requestKey } from './request-cache.js';

function resultFor(text: string, logprob: number): RequestResult {
  return requestResult({
    success: true,
    completions: [{ text, logprob, tokens: [{ text, logprob, top_logprobs: new Map([[text, logprob], ['2', -3.5]]) }] }],
    request_time: 0.25,
    batch_size: 2,
  });
}

describe('RequestCache', () => {
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-cache-'));

  it('keys requests by model and the full request, keeping int and float apart', () => {
    const a = request({ prompt: 'x', temperature: 0 });
    const b = request({ prompt: 'x', temperature: new PyFloat(0) });
    expect(requestKey('m', a)).not.toBe(requestKey('m', b));
    expect(requestKey('m', a)).not.toBe(requestKey('n', a));
    expect(requestKey('m', a)).toBe(requestKey('m', request({ prompt: 'x', temperature: 0 })));
  });

  it('stores and returns results exactly, marked cached, across reopen', () => {
    const path = join(dir, 'a.sqlite');
    const cache = RequestCache.open(path);
    const req = request({ prompt: 'Hello', max_tokens: 1 });
    expect(cache.get('m', req)).toBeUndefined();
    cache.putMany([{ modelId: 'm', request: req, result: resultFor(' world', -0.125) }]);
    cache.close();
    const again = RequestCache.open(path);
    expect(again.get('m', req)).toEqual({ ...resultFor(' world', -0.125), cached: true });
    expect(again.count()).toBe(1);
    expect(again.count('other')).toBe(0);
    again.close();
  });

  it('keeps the first result when a request is written twice', () => {
    const cache = RequestCache.open(':memory:');
    const req = request({ prompt: 'p' });
    cache.put('m', req, resultFor('first', -1));
    cache.put('m', req, resultFor('second', -2));
    expect(cache.get('m', req)?.completions[0]?.text).toBe('first');
    expect(cache.count()).toBe(1);
  });

  it('survives a kill -9 in the middle of writing: every committed batch, nothing half-written', async () => {
    const path = join(dir, 'killed.sqlite');
    // The child writes batches of 100 forever and reports each commit; it is killed at an arbitrary point.
    const script = `
      import { RequestCache } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
      import { request, requestResult } from '@flexhelm/core';
      const cache = RequestCache.open(${JSON.stringify(path)});
      for (let b = 0; ; b++) {
        cache.putMany(Array.from({ length: 100 }, (_, i) => ({ modelId: 'm', request: request({ prompt: 'p' + (b * 100 + i) }),
          result: requestResult({ success: true, completions: [] }) })));
        process.stdout.write('committed ' + (b + 1) + '\\n');
      }
    `;
    // Inside this package, so the child resolves @flexhelm/core whatever folder the tests run from.
    const file = fileURLToPath(new URL(`../.kill-test-${process.pid}.mjs`, import.meta.url));
    writeFileSync(file, script);
    try {
      const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
      let committed = 0;
      await new Promise<void>((resolve) => {
        child.stdout.on('data', (chunk: Buffer) => {
          const m = [...chunk.toString().matchAll(/committed (\d+)/g)].pop();
          if (m) committed = Number(m[1]);
          if (committed >= 5 && !child.killed) child.kill('SIGKILL');
        });
        child.on('exit', () => resolve());
      });
      expect(committed).toBeGreaterThanOrEqual(5);
      const cache = RequestCache.open(path);
      const n = cache.count();
      expect(n % 100).toBe(0);
      expect(n).toBeGreaterThanOrEqual(committed * 100);
      expect(cache.get('m', request({ prompt: `p${n - 1}` }))?.success).toBe(true);
      expect(cache.get('m', request({ prompt: `p${n}` }))).toBeUndefined();
      cache.close();
    } finally {
      unlinkSync(file);
    }
  });

  it('explains a damaged file', () => {
    const path = join(dir, 'bad.sqlite');
    writeFileSync(path, 'this is not a database, just text that is long enough to have a header'.repeat(20));
    expect(() => RequestCache.open(path)).toThrow(/cannot use the request cache .*bad\.sqlite.*move it away/);
  });

  it('rejects a garbage or truncated file with a typed error naming the file, and leaves the file as it was', () => {
    const full = join(dir, 'full.sqlite');
    const cache = RequestCache.open(full);
    for (let i = 0; i < 20; i++) cache.putMany(Array.from({ length: 50 }, (_, j) => ({ modelId: 'm', request: request({ prompt: `p${i}-${j}` }), result: resultFor('x'.repeat(200), -1) })));
    // Closing folds the WAL into the main file, so that cutting the file cuts the table.
    cache.close();
    const bytes = readFileSync(full);
    expect(bytes.length).toBeGreaterThan(64 * 1024);
    const garbage = join(dir, 'garbage.sqlite');
    writeFileSync(garbage, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919) % 251)));
    const truncated = join(dir, 'truncated.sqlite');
    writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
    for (const path of [garbage, truncated]) {
      const before = readFileSync(path);
      let caught: unknown;
      try {
        RequestCache.open(path);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(RequestCacheError);
      expect((caught as RequestCacheError).path).toBe(path);
      expect((caught as Error).message).toContain(`cannot use the request cache ${path}`);
      expect((caught as Error).message).toMatch(/move it away/);
      expect(readFileSync(path).equals(before)).toBe(true);
    }
  });

  it('says which folder cannot be written when the cache cannot be created', () => {
    const blocker = join(dir, 'a-file');
    writeFileSync(blocker, 'x');
    const path = join(blocker, 'cache', 'c.sqlite');
    expect(() => RequestCache.open(path)).toThrow(RequestCacheError);
    expect(() => RequestCache.open(path)).toThrow(new RegExp(`cannot create the request cache ${path} \\(ENOTDIR\\).*--cache-path`));
  });

  const canMount = process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;
  it.skipIf(!canMount)('a disk that fills: a RequestCacheError naming the folder, not a failed rollback; earlier batches kept', () => {
    const full = mkdtempSync(join(tmpdir(), 'flexhelm-cache-full-'));
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', full]).status).toBe(0);
    try {
      const path = join(full, 'c.sqlite');
      const cache = RequestCache.open(path);
      const batch = (k: number) => Array.from({ length: 20 }, (_, i) => ({ modelId: 'm', request: request({ prompt: `${k}-${i} ${'x'.repeat(2000)}` }), result: resultFor('y', -1) }));
      cache.putMany(batch(0));
      let err: unknown;
      for (let k = 1; k < 200 && !err; k++) {
        try {
          cache.putMany(batch(k));
        } catch (e) {
          err = e;
        }
      }
      expect(err).toBeInstanceOf(RequestCacheError);
      expect((err as Error).message).toBe(`cannot write the request cache ${path}: the folder ${full} is full (SQLITE_FULL); free space there or give a --cache-path in another folder. The requests cached before are kept.`);
      expect(cache.get('m', batch(0)[0]!.request)).toEqual({ ...resultFor('y', -1), cached: true });
      cache.close();
    } finally {
      // Lazily: libsql may hold the file until its handle is collected.
      spawnSync('umount', ['-l', full]);
    }
  });
});
