import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, cpSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { AtomicWriteError, commitTempFile, commitTree, isTempName, tempPathFor, writeFileAtomic, writeFileAtomicAsync, writeFileAtomicWith, writeFilesAtomic, writeFilesAtomicAsync, writeAll } from './index.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-atomic-write-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Throws unless `work` throws; returns what it threw. */
function failure(work: () => unknown): AtomicWriteError {
  try {
    work();
  } catch (err) {
    return err as AtomicWriteError;
  }
  throw new Error('expected the write to fail');
}

async function asyncFailure(work: () => Promise<unknown>): Promise<AtomicWriteError> {
  try {
    await work();
  } catch (err) {
    return err as AtomicWriteError;
  }
  throw new Error('expected the write to fail');
}

/** 1 MiB of text that is not one repeated byte (so nothing could compress or dedupe it away). */
const big = Array.from({ length: 1 << 16 }, (_, i) => `${(i * 2654435761) % 1e9}`.padStart(15, '0')).join('\n');

describe('writing on a working disk', () => {
  it('writes text and bytes under the final name, with no temporary left', () => {
    const dir = join(root, 'plain');
    writeFileAtomic(join(dir, 'a', 'b.json'), '{"x": 1}');
    writeFileAtomic(join(dir, 'bytes.bin'), new Uint8Array([1, 2, 3]));
    expect(readFileSync(join(dir, 'a', 'b.json'), 'utf8')).toBe('{"x": 1}');
    expect([...readFileSync(join(dir, 'bytes.bin'))]).toEqual([1, 2, 3]);
    writeFileAtomic(join(dir, 'bytes.bin'), 'replaced');
    expect(readFileSync(join(dir, 'bytes.bin'), 'utf8')).toBe('replaced');
    expect(readdirSync(dir).sort()).toEqual(['a', 'bytes.bin']);
  });

  it('writes more than one write(2) takes, in full', async () => {
    const dir = join(root, 'big');
    writeFileAtomic(join(dir, 'sync.txt'), big);
    await writeFileAtomicAsync(join(dir, 'async.txt'), big);
    expect(readFileSync(join(dir, 'sync.txt'), 'utf8')).toBe(big);
    expect(readFileSync(join(dir, 'async.txt'), 'utf8')).toBe(big);
  });

  it('a failing fill removes its temporary file and leaves the old file', () => {
    const dir = join(root, 'fill-fails');
    writeFileAtomic(join(dir, 'f'), 'old');
    expect(() => writeFileAtomicWith(join(dir, 'f'), (fd) => {
      writeAll(fd, 'new and partial');
      throw new Error('the producer broke');
    })).toThrow(/cannot write .*\/f: the producer broke/);
    expect(readFileSync(join(dir, 'f'), 'utf8')).toBe('old');
    expect(readdirSync(dir)).toEqual(['f']);
  });

  it('writes several files off the event loop, replacing old ones, with no temporary left', async () => {
    const dir = join(root, 'several-async');
    writeFileAtomic(join(dir, 'stats.json'), 'old');
    await writeFilesAtomicAsync([
      [join(dir, 'run_spec.json'), '{"name": "r"}'],
      [join(dir, 'stats.json'), big],
      [join(dir, 'sub', 'bytes.bin'), new Uint8Array([1, 2, 3])],
    ]);
    expect(readdirSync(dir).sort()).toEqual(['run_spec.json', 'stats.json', 'sub']);
    expect(readFileSync(join(dir, 'stats.json'), 'utf8')).toBe(big);
    expect([...readFileSync(join(dir, 'sub', 'bytes.bin'))]).toEqual([1, 2, 3]);
  });

  it('temporary names are hidden siblings that isTempName recognises', () => {
    const tmp = tempPathFor(join(root, 'x', 'stats.json'));
    expect(tmp.startsWith(join(root, 'x', '.stats.json.tmp-'))).toBe(true);
    expect(isTempName(tmp.slice(join(root, 'x').length + 1))).toBe(true);
    expect(isTempName('stats.json')).toBe(false);
  });

  it('commitTempFile and commitTree put a file and a folder in place; a failed commit removes the temporary', () => {
    const dir = join(root, 'commit');
    mkdirSync(dir, { recursive: true });
    const tmp = tempPathFor(join(dir, 'download.bin'));
    writeFileSync(tmp, 'payload');
    commitTempFile(tmp, join(dir, 'download.bin'));
    expect(readFileSync(join(dir, 'download.bin'), 'utf8')).toBe('payload');

    mkdirSync(join(dir, 'model.tmp', 'onnx'), { recursive: true });
    writeFileSync(join(dir, 'model.tmp', 'onnx', 'model.onnx'), 'graph');
    commitTree(join(dir, 'model.tmp'), join(dir, 'model'));
    expect(readFileSync(join(dir, 'model', 'onnx', 'model.onnx'), 'utf8')).toBe('graph');

    // A folder cannot be renamed onto a folder that has files: the error names it and the temporary goes.
    mkdirSync(join(dir, 'again.tmp'));
    writeFileSync(join(dir, 'again.tmp', 'x'), 'x');
    const err = failure(() => commitTree(join(dir, 'again.tmp'), join(dir, 'model')));
    expect(err).toBeInstanceOf(AtomicWriteError);
    expect(err.code).toBe('ENOTEMPTY');
    expect(readdirSync(dir).sort()).toEqual(['download.bin', 'model']);
  });
});

const canMount = process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;
if (!canMount) console.warn('skipping the full-disk and read-only tests: mounting a tmpfs needs root (as on this machine and in CI)');

describe.skipIf(!canMount)('on a real file system that refuses writes', () => {
  const mounts: string[] = [];
  function mount(name: string, options: string): string {
    const dir = join(root, name);
    mkdirSync(dir, { recursive: true });
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mount failed: ${r.stderr}`);
    mounts.push(dir);
    return dir;
  }
  afterEach(() => {
    for (const dir of mounts.splice(0)) spawnSync('umount', [dir]);
  });

  it('the fault is real: on a filling tmpfs one write(2) writes part and reports nothing', () => {
    const full = mount('short-write', 'size=256k');
    const fd = openSync(join(full, 'raw'), 'w');
    try {
      const bytes = Buffer.from(big);
      expect(writeSync(fd, bytes)).toBeLessThan(bytes.length);
    } finally {
      closeSync(fd);
    }
  });

  it('a disk that fills: ENOSPC naming the folder, no file under the final name, no temporary, the old file intact', async () => {
    const full = mount('full', 'size=256k');
    const dir = join(full, 'runs', 'v1', 'run');
    writeFileAtomic(join(dir, 'stats.json'), 'old stats');
    const err = failure(() => writeFileAtomic(join(dir, 'scenario_state.json'), big));
    expect(err).toBeInstanceOf(AtomicWriteError);
    expect(err.code).toBe('ENOSPC');
    expect(err.folder).toBe(dir);
    expect(err.message).toBe(`cannot write ${join(dir, 'scenario_state.json')}: the folder ${dir} is full (ENOSPC); free space there or write to another folder`);
    expect(failure(() => writeFileAtomic(join(dir, 'stats.json'), big)).code).toBe('ENOSPC');
    const asyncErr = await asyncFailure(() => writeFileAtomicAsync(join(dir, 'stats.json'), big));
    expect(asyncErr.message).toContain(`the folder ${dir} is full (ENOSPC)`);
    expect(readdirSync(dir)).toEqual(['stats.json']);
    expect(readFileSync(join(dir, 'stats.json'), 'utf8')).toBe('old stats');
    // The space the failed writes took is free again: a file that fits is written.
    writeFileAtomic(join(dir, 'scenario_state.json'), big.slice(0, 64 * 1024));
    expect(statSync(join(dir, 'scenario_state.json')).size).toBe(64 * 1024);
  });

  it('several files where the last does not fit: none of them appears', async () => {
    const full = mount('full-set', 'size=256k');
    const files = [['run_spec.json', 'spec'], ['scenario.json', 'scenario'], ['scenario_state.json', big]] as const;
    const err = failure(() => writeFilesAtomic(files.map(([f, text]) => [join(full, 'run', f), text] as const)));
    expect(err.code).toBe('ENOSPC');
    expect(err.path).toBe(join(full, 'run', 'scenario_state.json'));
    expect(readdirSync(join(full, 'run'))).toEqual([]);
    // Off the event loop, the same: the folder named, nothing under a final name, no temporary.
    const asyncErr = await asyncFailure(() => writeFilesAtomicAsync(files.map(([f, text]) => [join(full, 'run2', f), text] as const)));
    expect(asyncErr).toBeInstanceOf(AtomicWriteError);
    expect(asyncErr.code).toBe('ENOSPC');
    expect(asyncErr.path).toBe(join(full, 'run2', 'scenario_state.json'));
    expect(asyncErr.message).toBe(`cannot write ${join(full, 'run2', 'scenario_state.json')}: the folder ${join(full, 'run2')} is full (ENOSPC); free space there or write to another folder`);
    expect(readdirSync(join(full, 'run2'))).toEqual([]);
  });

  it('a read-only file system: EROFS naming the folder, for a file and for a folder still to be made', () => {
    const ro = mount('ro', 'ro,size=64k');
    const err = failure(() => writeFileAtomic(join(ro, 'stats.json'), 'x'));
    expect(err.code).toBe('EROFS');
    expect(err.message).toBe(`cannot write ${join(ro, 'stats.json')}: the folder ${ro} is on a read-only file system (EROFS); make it writable or write to another folder`);
    // A recursive mkdir would say ENOENT here: the folder that refused is named instead.
    const deep = failure(() => writeFileAtomic(join(ro, 'runs', 'v1', 'stats.json'), 'x'));
    expect(deep.code).toBe('EROFS');
    expect(deep.folder).toBe(ro);
    expect(readdirSync(ro)).toEqual([]);
  });

  it('a folder this user may not write: EACCES naming it (checked as an unprivileged user)', () => {
    const dir = join(root, 'locked');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'keep.json'), 'old');
    chmodSync(dir, 0o555);
    chmodSync(root, 0o755);
    // The unprivileged child loads a copy of the built package from this test's own folder: the clone may sit under a
    // folder only its owner can enter (mktemp's 0700), which would refuse the import, not the write.
    const lib = join(root, 'lib');
    cpSync(fileURLToPath(new URL('../dist/', import.meta.url)), lib, { recursive: true });
    writeFileSync(join(lib, 'package.json'), '{"type":"module"}');
    const index = join(lib, 'index.js');
    const script = `import(${JSON.stringify(index)}).then((m) => { try { m.writeFileAtomic(${JSON.stringify(join(dir, 'keep.json'))}, 'new'); console.log('written'); } catch (e) { console.log(e.code + ' ' + e.message); } })`;
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script], { encoding: 'utf8' });
    if (r.status !== 0 && /setpriv/.test(r.stderr)) return; // no setpriv here: the read-only cases above cover the path
    expect(r.stdout.trim()).toBe(`EACCES cannot write ${join(dir, 'keep.json')}: the folder ${dir} is not writable by this user (EACCES); make it writable or write to another folder`);
    expect(readdirSync(dir)).toEqual(['keep.json']);
    expect(readFileSync(join(dir, 'keep.json'), 'utf8')).toBe('old');
  });
});
