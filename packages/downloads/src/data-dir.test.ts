import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveDataDir } from './data-dir.js';

describe('resolveDataDir', () => {
  it('prefers the explicit folder, then FLEXHELM_DATA_DIR, then XDG_CACHE_HOME, then ~/.cache', () => {
    const env = { FLEXHELM_DATA_DIR: '/data/flex', XDG_CACHE_HOME: '/xdg' };
    expect(resolveDataDir({ dataDir: 'rel/dir', env })).toBe(resolve('rel/dir'));
    expect(resolveDataDir({ env })).toBe('/data/flex');
    expect(resolveDataDir({ env: { XDG_CACHE_HOME: '/xdg' } })).toBe('/xdg/flexhelm');
    expect(resolveDataDir({ env: {} })).toBe(join(homedir(), '.cache', 'flexhelm'));
  });

  it('ignores a relative XDG_CACHE_HOME, as the XDG spec asks', () => {
    expect(resolveDataDir({ env: { XDG_CACHE_HOME: 'cache' } })).toBe(join(homedir(), '.cache', 'flexhelm'));
  });
});
