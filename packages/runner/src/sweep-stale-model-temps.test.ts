import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_MODEL, resolveModel } from './resolve-model.js';
import { sweepStaleModelTemps } from './sweep-stale-model-temps.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-sweep-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The PID of a process that has exited (spawned, waited for). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  expect(child.status).toBe(0);
  return child.pid!;
}

function tempFolder(dataDir: string, name: string): string {
  const folder = join(dataDir, 'models', name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'model.safetensors'), 'half written');
  return folder;
}

describe('sweepStaleModelTemps', () => {
  it("removes a dead process's temporary model folder and keeps a live one's and everything else", () => {
    const dataDir = join(root, 'a');
    const dead = tempFolder(dataDir, `acme--opt-x.tmp-${deadPid()}`);
    const live = tempFolder(dataDir, `acme--opt-x.tmp-${process.pid}`);
    const parent = tempFolder(dataDir, `acme--opt-y.tmp-${process.ppid}`);
    const model = tempFolder(dataDir, 'acme--opt-x');
    const notPid = tempFolder(dataDir, 'acme--opt-x.tmp-abc');
    writeFileSync(join(dataDir, 'models', `notes.tmp-${deadPid()}`), 'a file, not a folder');
    expect(sweepStaleModelTemps(dataDir)).toEqual([dead]);
    expect(existsSync(dead)).toBe(false);
    for (const kept of [live, parent, model, notPid]) expect(existsSync(kept)).toBe(true);
  });

  it('does nothing without a models folder', () => {
    expect(sweepStaleModelTemps(join(root, 'none'))).toEqual([]);
  });

  it('runs when a model is resolved, before the embedded default is made', async () => {
    const dataDir = join(root, 'b');
    const stale = tempFolder(dataDir, `${DEFAULT_MODEL.replace('/', '--')}.tmp-${deadPid()}`);
    const r = await resolveModel({ model: DEFAULT_MODEL, dataDir });
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(join(r.folder, 'config.json'))).toBe(true);
  });
});
