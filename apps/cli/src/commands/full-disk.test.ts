import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestCache } from '@flexhelm/request-cache';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-full-disk-'));
const modelDir = join(root, 'tiny');
const offloadDir = join(root, 'offload');
const cachePath = join(root, 'cache.sqlite');
const common = ['-d', 'synthetic_reasoning:mode=induction', '-m', '4', '--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '-t', '1', '--cache-path', cachePath, '--gpu-batch-size', '4', '--compute-dtype', 'fp32'];
const resident = ['--percent', '100', '0', '100', '0', '100', '0'];

/**
 * A real full file system: a tmpfs with room for the data but only 4 inodes (its root, the engine's scratch folder
 * and one file), so the second offload file fails with ENOSPC after the budget check (which looks at free bytes)
 * has passed. Mounting needs root (as on this machine and in CI); elsewhere the test is skipped, saying why.
 */
function mountFullDisk(): string | undefined {
  mkdirSync(offloadDir, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m,nr_inodes=4', 'tmpfs', offloadDir], { encoding: 'utf8' });
  if (r.status === 0) return undefined;
  return `cannot mount a tmpfs (${(r.stderr || r.error?.message || 'unknown error').trim()}); run the tests as root to cover a full disk`;
}
const cannotMount = mountFullDisk();
if (cannotMount) console.warn(`skipping the full-disk test: ${cannotMount}`);

function flexhelm(args: string[]) {
  return spawnSync(process.execPath, [main, 'run', ...args], { encoding: 'utf8', timeout: 240_000 });
}

beforeAll(() => {
  makeTinyOptModel(modelDir, 9);
});

afterAll(() => {
  if (!cannotMount) spawnSync('umount', [offloadDir]);
  rmSync(root, { recursive: true, force: true });
});

describe.skipIf(cannotMount !== undefined)('flexhelm run on a full offload disk', () => {
  it('stops with a clear message and status 2, leaving no run directory, no offload files and an intact cache', () => {
    // A first run (weights in RAM) fills the request cache.
    const first = flexhelm([...common, ...resident, '--output-path', join(root, 'out-first')]);
    expect(first.status, first.stderr).toBe(0);
    const before = RequestCache.open(cachePath);
    const cached = before.count();
    before.close();
    expect(cached).toBe(4);

    // All weights on disk: the engine writes one file per layer into the offload folder, and the disk fills up.
    const full = flexhelm([...common, '--output-path', join(root, 'out-full'), '--percent', '0', '0', '100', '0', '100', '0', '--offload-dir', offloadDir]);
    expect(full.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(full.stderr).toMatch(new RegExp(`the offload directory ${offloadDir} is full \\(ENOSPC writing ${offloadDir}/\\S+\\.bin\\): free space there, give another --offload-dir, or put less on disk with --percent`));
    expect(full.status).toBe(2);
    expect(existsSync(join(root, 'out-full', 'runs'))).toBe(false);
    // The engine's scratch folder (with the files it did write) is gone.
    expect(readdirSync(offloadDir)).toEqual([]);
    const after = RequestCache.open(cachePath);
    expect(after.count()).toBe(cached);
    after.close();

    // The cache still serves the first run's requests: a rerun computes nothing.
    const again = flexhelm([...common, ...resident, '--output-path', join(root, 'out-again')]);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/\(4 from cache\)/);
  }, 300_000);

  it('an output folder that fills while the five files are written: the run folder named, none of the files, no temporary', () => {
    // Room for the run folder and a few KiB, not for scenario_state.json: a single write(2) there used to write part
    // of it, which was then renamed into place, and the message blamed the offload directory.
    const out = join(root, 'out-small');
    mkdirSync(out, { recursive: true });
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=16k', 'tmpfs', out]).status).toBe(0);
    try {
      const r = flexhelm([...common, ...resident, '--output-path', out]);
      const runDir = join(out, 'runs', 'v1', 'synthetic_reasoning:mode=induction,model=local_tiny-opt');
      const lines = r.stderr.trim().split('\n');
      expect(lines.at(-1)).toMatch(/^flexhelm run: cannot write \S+\.json: the folder \S+ is full \(ENOSPC\); free space there or write to another folder\. No file was left half-written; the request cache keeps every completed request/);
      expect(lines.at(-1)).toContain(`the folder ${runDir} is full`);
      expect(r.stderr).not.toMatch(/offload directory|internal error|\n\s+at /);
      expect(r.status).toBe(2);
      expect(readdirSync(runDir)).toEqual([]);
    } finally {
      spawnSync('umount', [out]);
    }
  }, 300_000);
});
