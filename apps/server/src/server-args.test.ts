import { describe, expect, it } from 'vitest';
import { parseServerArgs } from './server-args.js';

describe('parseServerArgs connection limits', () => {
  it('defaults to sane limits and takes each flag', () => {
    expect(parseServerArgs([], {})).toMatchObject({ headersTimeoutMs: 10_000, bodyTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000, maxConnections: 256 });
    const a = parseServerArgs(['--headers-timeout-ms', '2000', '--body-timeout-ms', '4000', '--keep-alive-timeout-ms', '700', '--max-connections', '9'], {});
    expect(a).toMatchObject({ headersTimeoutMs: 2000, bodyTimeoutMs: 4000, keepAliveTimeoutMs: 700, maxConnections: 9 });
  });

  it('refuses values that would disable a limit or that Node cannot honour', () => {
    expect(() => parseServerArgs(['--body-timeout-ms', '0'], {})).toThrow("--body-timeout-ms must be an integer ≥ 100, got '0'");
    expect(() => parseServerArgs(['--max-connections', '0'], {})).toThrow("--max-connections must be an integer ≥ 1, got '0'");
    expect(() => parseServerArgs(['--headers-timeout-ms', '5000', '--body-timeout-ms', '1000'], {})).toThrow('--headers-timeout-ms (5000) must not exceed --body-timeout-ms (1000)');
  });
});
