import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, requestResult } from '@flexhelm/core';
import { RequestCache } from '@flexhelm/request-cache';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { waitForCachedRequests } from '../test-cached-requests.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-faults-'));
const modelDir = join(root, 'tiny');
const dataDir = join(root, 'data');
const model = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', dataDir, '-t', '1', '--compute-dtype', 'fp32'];
const resident = ['--percent', '100', '0', '100', '0', '100', '0', '--gpu-batch-size', '4'];
const induction = ['-d', 'synthetic_reasoning:mode=induction', '-m', '4', ...model, ...resident];
const readOnly = join(root, 'read-only');

/** A real read-only file system (needs root, as on this machine and in CI); elsewhere those cases are skipped, saying why. */
function mountReadOnly(): string | undefined {
  mkdirSync(readOnly, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', readOnly], { encoding: 'utf8' });
  return r.status === 0 ? undefined : `cannot mount a read-only tmpfs (${(r.stderr || r.error?.message || 'unknown error').trim()}); run the tests as root`;
}
const cannotMount = mountReadOnly();
if (cannotMount) console.warn(`skipping the read-only output test: ${cannotMount}`);

/**
 * `flexhelm run` as a child process with a deadline: the process must exit by itself well before it (this loaded
 * 2-core machine loads the tiny model in seconds); a hang shows as `signal: 'SIGTERM'` instead of a status.
 */
function flexhelm(args: string[], timeout = 60_000) {
  const r = spawnSync(process.execPath, [main, 'run', ...args], { encoding: 'utf8', timeout });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** Exit 2 and exactly one line on stderr, with no stack and no "internal error". */
function expectOneLineError(r: ReturnType<typeof flexhelm>, message: RegExp | string): void {
  expect(r.signal, r.stderr).toBeNull();
  expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
  expect(r.stderr.split('\n').filter((l) => l !== '')).toHaveLength(1);
  if (typeof message === 'string') expect(r.stderr).toContain(message);
  else expect(r.stderr).toMatch(message);
  expect(r.status).toBe(2);
}

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

beforeAll(() => {
  makeTinyOptModel(modelDir, 5);
});

afterAll(() => {
  if (!cannotMount) spawnSync('umount', [readOnly]);
  rmSync(root, { recursive: true, force: true });
});

describe('flexhelm run after a fault exits by itself, with one line and status 2', () => {
  it.skipIf(cannotMount !== undefined)('an output folder on a read-only mount', () => {
    const out = join(readOnly, 'out');
    const r = flexhelm([...induction, '--output-path', out]);
    expectOneLineError(r, `flexhelm run: the output folder ${out} cannot be written (EROFS): make it writable or give --output-path a writable folder`);
    // Refused before the model: no engine line.
    expect(r.stderr).not.toMatch(/^model /m);
  });

  it('a request cache that is garbage or truncated: names the file, says to move it away, leaves it as it was', () => {
    const garbage = join(root, 'garbage.sqlite');
    writeFileSync(garbage, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919) % 251)));
    // A real cache with a table spanning many pages, cut in half.
    const good = join(root, 'good.sqlite');
    const filled = RequestCache.open(good);
    const completion = requestResult({ success: true, completions: [{ text: 'x'.repeat(300), logprob: -1, tokens: [] }] });
    filled.putMany(Array.from({ length: 500 }, (_, i) => ({ modelId: 'm', request: request({ prompt: `prompt ${i}` }), result: completion })));
    filled.close();
    const truncated = join(root, 'truncated.sqlite');
    const bytes = readFileSync(good);
    expect(bytes.length).toBeGreaterThan(64 * 1024);
    writeFileSync(truncated, bytes.subarray(0, bytes.length / 2));
    for (const cachePath of [garbage, truncated]) {
      const before = readFileSync(cachePath);
      const out = join(root, `out-${cachePath.endsWith('garbage.sqlite') ? 'garbage' : 'truncated'}`);
      const r = flexhelm([...induction, '--output-path', out, '--cache-path', cachePath]);
      expectOneLineError(r, new RegExp(`^flexhelm run: cannot use the request cache ${cachePath}: .*move it away .*--cache-path\\.\\n$`));
      expect(r.stderr).not.toMatch(/^model /m);
      expect(readFileSync(cachePath).equals(before)).toBe(true);
      expect(existsSync(join(out, 'runs'))).toBe(false);
    }
  });

  it('--max-ram 0, negative or not a number', () => {
    for (const value of ['0', '-3', 'NaN', 'lots']) {
      const r = flexhelm([...induction, `--max-ram=${value}`, '--output-path', join(root, 'out-ram')]);
      expectOneLineError(r, `flexhelm run: --max-ram must be a positive number of GiB (e.g. --max-ram 16), got '${value}'`);
    }
  });

  it('--offload-dir that is a file, for a policy that uses disk: the cause, not a cleanup error', () => {
    const file = join(root, 'a-file');
    writeFileSync(file, 'not a folder');
    const r = flexhelm(['-d', 'synthetic_reasoning:mode=induction', '-m', '4', ...model, '--percent', '0', '0', '100', '0', '100', '0', '--offload-dir', file, '--output-path', join(root, 'out-offload')]);
    expectOneLineError(r, `the offload directory ${file} is not usable (it is a file, not a folder); pass --offload-dir with a writable folder`);
    expect(readFileSync(file, 'utf8')).toBe('not a folder');
  });

  it('a dataset missing offline is reported before the machine profile, the policy search and the model load', () => {
    // No --percent: the policy would be searched (profiling this machine first), then the model loaded.
    const empty = join(root, 'data-empty');
    const r = flexhelm(['-d', 'mmlu:subject=anatomy', '-m', '2', '--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', empty, '-t', '1', '--offline', '--output-path', join(root, 'out-offline')]);
    expectOneLineError(r, /^flexhelm run: Could not get \S+ into \S+mmlu\S*: .*offline/);
    expect(existsSync(join(empty, 'profile'))).toBe(false);
    expect(filesUnder(empty).filter((f) => !f.startsWith('scenarios/'))).toEqual([]);
  });
});

describe('flexhelm run interrupted and restarted', () => {
  it('Ctrl-C prints one line saying how to resume, exits 130 leaving no half-written file, and the rerun resumes', async () => {
    const cachePath = join(root, 'interrupted.sqlite');
    const out = join(root, 'out-interrupted');
    // One request per batch and enough of them that the run is still going when the first two are cached.
    const args = ['-d', 'synthetic_reasoning:mode=pattern_match', '-m', '40', ...model, '--percent', '100', '0', '100', '0', '100', '0', '--gpu-batch-size', '1', '--output-path', out, '--cache-path', cachePath];
    const child = spawn(process.execPath, [main, 'run', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((done) => child.on('exit', (status, signal) => done({ status, signal })));
    const cached = await waitForCachedRequests(cachePath, 2, 200, () => child.exitCode !== null);
    expect(cached).toBeGreaterThanOrEqual(2);
    expect(child.exitCode, 'the run finished before it could be interrupted').toBeNull();
    child.kill('SIGINT');
    const deadline = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const { status, signal } = await exited;
    clearTimeout(deadline);
    expect(signal, stderr).toBeNull();
    expect(status, stderr).toBe(130);
    expect(stderr).not.toMatch(/internal error|\n\s+at /);
    const last = stderr.trimEnd().split('\n').at(-1);
    expect(last).toBe(`flexhelm run: interrupted; finished batches are kept in ${cachePath}: run the same command again to resume`);
    // No run files (the run had not finished) and no temporary files anywhere under the output folder.
    expect(filesUnder(join(out, 'runs'))).toEqual([]);
    expect(filesUnder(out).filter((f) => /\.tmp|write-check/.test(f))).toEqual([]);
    const kept = RequestCache.open(cachePath);
    const afterInterrupt = kept.count();
    kept.close();
    expect(afterInterrupt).toBeGreaterThanOrEqual(cached);

    const resumed = flexhelm(args, 240_000);
    expect(resumed.stderr).not.toMatch(/internal error/);
    expect(resumed.status).toBe(0);
    expect(resumed.stderr).toMatch(new RegExp(`\\(${afterInterrupt} from cache\\)`));
  }, 300_000);

  it("removes a dead model maker's <name>.tmp-<PID>/ folder at the next start, never a live process's", () => {
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    const staleDir = join(dataDir, 'models', `flexhelm--opt-tiny-random.tmp-${dead}`);
    const liveDir = join(dataDir, 'models', `flexhelm--opt-tiny-random.tmp-${process.pid}`);
    for (const dir of [staleDir, liveDir]) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'model.safetensors'), 'half written');
    }
    const r = flexhelm([...induction, '--output-path', join(root, 'out-sweep')]);
    expect(r.stderr).not.toMatch(/internal error/);
    expect(r.status).toBe(0);
    expect(r.stderr).toContain(`removed ${staleDir}, left by a model maker that did not finish`);
    expect(existsSync(staleDir)).toBe(false);
    expect(readFileSync(join(liveDir, 'model.safetensors'), 'utf8')).toBe('half written');
  });
});
