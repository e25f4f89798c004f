import { mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withFileLock } from './file-lock.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flexhelm-lock-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('withFileLock', () => {
  it('runs holders one at a time and removes the lock afterwards', async () => {
    const lock = join(dir, 'x.lock');
    const log: string[] = [];
    let waits = 0;
    const job = (name: string) =>
      withFileLock(
        lock,
        async () => {
          log.push(`${name} in`);
          await new Promise((r) => setTimeout(r, 20));
          log.push(`${name} out`);
          return name;
        },
        { pollMs: 5, onWait: () => waits++ },
      );
    expect(await Promise.all([job('a'), job('b'), job('c')])).toEqual(['a', 'b', 'c']);
    for (let i = 0; i < log.length; i += 2) expect(log[i + 1]).toBe(log[i]!.replace(' in', ' out'));
    expect(waits).toBeGreaterThan(0);
    expect(await readdir(dir)).toEqual([]);
  });

  it('releases the lock when the holder throws', async () => {
    const lock = join(dir, 'y.lock');
    await expect(withFileLock(lock, async () => Promise.reject(new Error('inner')))).rejects.toThrow('inner');
    expect(await readdir(dir)).toEqual([]);
  });

  it('takes over a lock file that was not refreshed within staleMs, even from an unknown holder', async () => {
    const lock = join(dir, 'z.lock');
    await writeFile(lock, 'garbage');
    const old = new Date(Date.now() - 60_000);
    await utimes(lock, old, old);
    expect(await withFileLock(lock, async () => 'ran', { staleMs: 1_000, pollMs: 5 })).toBe('ran');
  });
});
