import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HelmError } from '@flexhelm/core';
import { loadHelmSchema, type HelmSchema } from './helm-schema.js';
import { summarizeSuite } from './summarize-suite.js';
import { HAVE_HELM_SOURCE, HELM_SOURCE, makeTestSuite } from './test-suite.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-summarize-faults-'));
const base = join(root, 'base');
let schema: HelmSchema;
let runs: string[];

/** A fresh output folder holding a copy of the two-run base suite as suite `S`. */
function freshSuite(name: string): string {
  const out = join(root, name);
  cpSync(join(base, 'runs', 'S'), join(out, 'runs', 'S'), { recursive: true });
  return out;
}

/** Every file under `dir`, recursively, with its bytes (to show nothing changed). */
function snapshot(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else files.set(p, readFileSync(p, 'latin1'));
    }
  };
  walk(dir);
  return files;
}

function summarize(out: string, extra: { skipRunDisplayJson?: boolean } = {}) {
  const warnings: string[] = [];
  const result = summarizeSuite({ outputPath: out, suite: 'S', schema, date: '2026-12-02', warn: (m) => warnings.push(m), ...extra });
  return { result, warnings };
}

function failure(fn: () => unknown): HelmError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HelmError);
    // One line that names the problem: no stack trace for the user.
    expect((err as Error).message).not.toContain('\n');
    return err as HelmError;
  }
  throw new Error('expected a HelmError');
}

describe.skipIf(!HAVE_HELM_SOURCE && !process.env.CI)('summarizeSuite on hostile suite folders', () => {
  beforeAll(async () => {
    schema = await loadHelmSchema({ helmSourceDir: HELM_SOURCE, offline: true });
    // In the order summarize reads them (sorted folder names).
    runs = (await makeTestSuite(base, 'S', join(root, 'models'), ['dyck_language:num_parenthesis_pairs=2'], 2)).sort();
  }, 600_000);

  it('a truncated stats.json: a one-line error naming the file, and the previous summary left as it was', () => {
    const out = freshSuite('truncated');
    summarize(out);
    const before = snapshot(join(out, 'runs'));
    const stats = join(out, 'runs', 'S', runs[0]!, 'stats.json');
    const text = readFileSync(stats, 'utf8');
    writeFileSync(stats, text.slice(0, text.length / 2));
    const err = failure(() => summarize(out));
    expect(err.message).toContain(`${runs[0]}/stats.json is not valid JSON`);
    const after = snapshot(join(out, 'runs'));
    after.delete(stats);
    before.delete(stats);
    expect(after).toEqual(before);
  });

  it('a stats.json of the wrong shape is refused with what is wrong', () => {
    const out = freshSuite('garbage');
    writeFileSync(join(out, 'runs', 'S', runs[1]!, 'stats.json'), '{"hello": [1, 2, 3]}');
    const err = failure(() => summarize(out));
    expect(err.message).toMatch(/stats\.json does not match HELM 0\.2\.1's format/);
    // Nothing was written: no summary files, no temporaries.
    expect(readdirSync(join(out, 'runs', 'S')).sort()).toEqual(runs);
  });

  it('binary garbage in run_spec.json is refused the same way', () => {
    const out = freshSuite('binary');
    writeFileSync(join(out, 'runs', 'S', runs[0]!, 'run_spec.json'), Buffer.from([0x00, 0xff, 0x13, 0x37, 0x80]));
    expect(failure(() => summarize(out)).message).toContain('run_spec.json is not valid JSON');
  });

  it('a run without stats.json is skipped with HELM’s warning', () => {
    const out = freshSuite('missing-stats');
    rmSync(join(out, 'runs', 'S', runs[0]!, 'stats.json'));
    const { result, warnings } = summarize(out);
    expect(result.runs.map((r) => r.dirName)).toEqual([runs[1]]);
    expect(warnings).toContain(`WARNING: ${runs[0]} doesn't have run_spec.json or stats.json, skipping`);
    expect(existsSync(join(out, 'runs', 'S', runs[0]!, 'display_predictions.json'))).toBe(false);
  });

  it('a run without scenario_state.json stops the display files (as HELM does), unless they are skipped', () => {
    const out = freshSuite('missing-state');
    rmSync(join(out, 'runs', 'S', runs[1]!, 'scenario_state.json'));
    const err = failure(() => summarize(out));
    expect(err.message).toContain(`Could not load ScenarioState from ${out}/runs/S/${runs[1]}/scenario_state.json`);
    expect(err.message).toContain('--skip-write-run-display-json');
    // The display files of the first run were staged, then removed with the rest.
    expect(existsSync(join(out, 'runs', 'S', 'runs.json'))).toBe(false);
    expect(readdirSync(join(out, 'runs', 'S', runs[0]!)).some((n) => n.includes('display') || n.includes('.tmp-'))).toBe(false);
    const { result } = summarize(out, { skipRunDisplayJson: true });
    expect(result.runs).toHaveLength(2);
    expect(existsSync(join(out, 'runs', 'S', 'groups', 'dyck_language.json'))).toBe(true);
  });

  it('a run folder that links outside the output folder is skipped; one inside it is read', () => {
    const out = freshSuite('links');
    const outside = join(root, 'elsewhere');
    cpSync(join(base, 'runs', 'S', runs[0]!), join(outside, 'run'), { recursive: true });
    symlinkSync(join(outside, 'run'), join(out, 'runs', 'S', 'zz-outside'));
    // A second suite in the same output folder may share runs by link.
    cpSync(join(base, 'runs', 'S', runs[0]!), join(out, 'runs', 'other', 'run'), { recursive: true });
    symlinkSync(join(out, 'runs', 'other', 'run'), join(out, 'runs', 'S', 'zz-inside'));
    const { result, warnings } = summarize(out);
    expect(result.runs.map((r) => r.dirName)).toEqual([...runs, 'zz-inside']);
    expect(warnings.find((w) => w.includes('zz-outside'))).toMatch(/is a link to .*elsewhere\/run, outside .*, skipping/);
    // Nothing was written outside.
    expect(readdirSync(join(outside, 'run')).sort()).toEqual(readdirSync(join(base, 'runs', 'S', runs[0]!)).sort());
  });

  it('a stats.json linking to a file outside the run folder is refused', () => {
    const out = freshSuite('file-link');
    const secret = join(root, 'secret.json');
    writeFileSync(secret, '[]');
    const stats = join(out, 'runs', 'S', runs[0]!, 'stats.json');
    rmSync(stats);
    symlinkSync(secret, stats);
    expect(failure(() => summarize(out)).message).toMatch(/stats\.json is a link to .*secret\.json, outside/);
  });

  it('a groups folder that links elsewhere is refused before anything is written', () => {
    const out = freshSuite('groups-link');
    const elsewhere = join(root, 'elsewhere-groups');
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, join(out, 'runs', 'S', 'groups'));
    expect(failure(() => summarize(out)).message).toContain('groups is a link; summarize writes its tables only inside the suite folder');
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(existsSync(join(out, 'runs', 'S', 'runs.json'))).toBe(false);
  });

  it('a missing suite folder names the path and the fix', () => {
    const err = failure(() => summarizeSuite({ outputPath: join(root, 'nothing'), suite: 'S', schema }));
    expect(err.message).toContain(`no suite folder ${join(root, 'nothing')}/runs/S`);
    expect(failure(() => summarizeSuite({ outputPath: root, suite: '../x', schema })).message).toContain('invalid suite name');
  });

  const canMount = process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;
  describe.skipIf(!canMount)('on a real file system that refuses writes', () => {
    const mnt = join(root, 'mnt');
    afterAll(() => {
      spawnSync('umount', [mnt]);
    });

    it('a full disk part-way through: nothing half-written, no temporaries, the runs untouched', () => {
      mkdirSync(mnt, { recursive: true });
      expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt]).status).toBe(0);
      const out = join(mnt, 'out');
      cpSync(join(base, 'runs', 'S'), join(out, 'runs', 'S'), { recursive: true });
      const before = snapshot(out);
      // Fill the disk so the first summary files fit and the larger ones do not.
      const free = () => Number(spawnSync('df', ['-B1', '--output=avail', mnt], { encoding: 'utf8' }).stdout.split('\n')[1]);
      writeFileSync(join(mnt, 'filler'), Buffer.alloc(Math.max(0, free() - 64 * 1024)));
      const err = (() => {
        try {
          summarize(out);
        } catch (e) {
          return e as NodeJS.ErrnoException;
        }
        throw new Error('expected ENOSPC');
      })();
      expect(err.code).toBe('ENOSPC');
      expect(snapshot(out)).toEqual(before);
      rmSync(join(mnt, 'filler'));
      expect(spawnSync('umount', [mnt]).status).toBe(0);
    });

    it('a read-only mount: refused with EROFS, nothing changed', () => {
      expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt]).status).toBe(0);
      const out = join(mnt, 'out');
      cpSync(join(base, 'runs', 'S'), join(out, 'runs', 'S'), { recursive: true });
      expect(spawnSync('mount', ['-o', 'remount,ro', mnt]).status).toBe(0);
      const before = snapshot(out);
      expect(() => summarize(out)).toThrow(expect.objectContaining({ code: 'EROFS' }));
      expect(snapshot(out)).toEqual(before);
    });
  });
});
