import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HelmError } from '@flexhelm/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { joinInside, realPathInside } from './join-inside.js';

let dir = '';
let root = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flexhelm-join-inside-'));
  root = join(dir, 'scenarios', 'mmlu', 'data');
  await mkdir(join(root, 'test'), { recursive: true });
  await writeFile(join(root, 'test', 'anatomy_test.csv'), 'q,a,b,A\n');
  await mkdir(join(dir, 'secret'));
  await writeFile(join(dir, 'secret', 'leak_test.csv'), 'SECRET,a,b,A\n');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const refusal = (run: () => unknown): HelmError => {
  try {
    run();
  } catch (err) {
    if (err instanceof HelmError) return err;
    throw err;
  }
  throw new Error('accepted');
};

describe('joinInside', () => {
  it('joins names that stay inside the folder, including inner ".." that come back', () => {
    expect(joinInside(root, 'test', 'anatomy_test.csv')).toBe(join(root, 'test', 'anatomy_test.csv'));
    expect(joinInside(root, 'test', 'x/../anatomy_test.csv')).toBe(join(root, 'test', 'anatomy_test.csv'));
  });

  it.each([
    ['test', '../../../../secret/leak_test.csv'],
    ['test', '../../../../../../../../../etc/passwd'],
    ['..'],
    ['test', `${'../'.repeat(4)}secret`],
  ])('refuses %j with a ValueError', (...parts) => {
    const error = refusal(() => joinInside(root, ...parts));
    expect(error.pythonClass).toBe('ValueError');
    expect(error.message).toMatch(/leads outside the scenario's data folder; scenario arguments that name files must be plain names/);
  });

  it('refuses an absolute part', () => {
    expect(refusal(() => joinInside(root, '/etc/passwd')).message).toMatch(/"\/etc\/passwd" is an absolute path/);
  });

  it('refuses a NUL byte, which would cut the name short in C', () => {
    expect(refusal(() => joinInside(root, 'test', 'anatomy\0_test.csv')).message).toMatch(/contains a NUL byte/);
  });

  it('treats backslashes and percent-escapes as ordinary name characters on POSIX (they stay inside)', () => {
    expect(joinInside(root, '..\\..\\secret')).toBe(join(root, '..\\..\\secret'));
    expect(joinInside(root, '%2e%2e%2fsecret')).toBe(join(root, '%2e%2e%2fsecret'));
  });
});

describe('realPathInside', () => {
  it('returns the real path of a file inside the folder', async () => {
    expect(await realPathInside(root, join(root, 'test', 'anatomy_test.csv'))).toMatch(/anatomy_test\.csv$/);
  });

  it('refuses a file inside the folder that is a symbolic link leading out', async () => {
    await symlink(join(dir, 'secret', 'leak_test.csv'), join(root, 'test', 'leak_test.csv'));
    await expect(realPathInside(root, joinInside(root, 'test', 'leak_test.csv'))).rejects.toThrow(/"test\/leak_test.csv" is a link that leads outside the scenario's data folder/);
  });

  it('follows links that stay inside', async () => {
    await symlink(join(root, 'test', 'anatomy_test.csv'), join(root, 'test', 'alias_test.csv'));
    expect(await realPathInside(root, join(root, 'test', 'alias_test.csv'))).toMatch(/anatomy_test\.csv$/);
  });
});
