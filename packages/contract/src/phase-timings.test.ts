import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { PhaseTotals, timingLine, timingsEnabled } from './phase-timings.js';

describe('phase timings (FLEXHELM_TIMINGS)', () => {
  it('are on only when FLEXHELM_TIMINGS is set to something other than 0', () => {
    expect(timingsEnabled({})).toBe(false);
    expect(timingsEnabled({ FLEXHELM_TIMINGS: '' })).toBe(false);
    expect(timingsEnabled({ FLEXHELM_TIMINGS: '0' })).toBe(false);
    expect(timingsEnabled({ FLEXHELM_TIMINGS: '1' })).toBe(true);
  });

  it('format one line per phase, with the time since the process started', () => {
    expect(timingLine('engine.load', 1234.4, 20_550, 'onednn-bf16, 24 layers')).toBe('timing: engine.load 1234 ms (at 20.55 s; onednn-bf16, 24 layers)');
    expect(timingLine('run.data', 0.2, 900)).toBe('timing: run.data 0 ms (at 0.90 s)');
  });

  it('sum repeated sub-phases in the order first seen, also when the timed work throws', async () => {
    const totals = new PhaseTotals();
    totals.add('read', 5);
    totals.add('load', 2);
    totals.add('read', 7);
    await expect(totals.time('load', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(totals.get('read')).toBe(12);
    expect(totals.get('load')).toBeGreaterThanOrEqual(2);
    expect(totals.get('absent')).toBe(0);
  });

  it('write to stderr only when asked (the built module, in a process of its own)', () => {
    const script = `import('${new URL('../dist/phase-timings.js', import.meta.url).pathname}').then((m) => { const t = new m.PhaseTotals(); t.add('a', 3); t.add('b', 4); t.report('x'); m.reportPhase('c', 1); })`;
    const run = (env: Record<string, string>) => spawnSync(process.execPath, ['-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' });
    const on = run({ FLEXHELM_TIMINGS: '1' });
    expect(on.status).toBe(0);
    expect(on.stderr.split('\n').filter(Boolean).map((l) => l.replace(/ \(at .*/, ''))).toEqual(['timing: a 3 ms', 'timing: b 4 ms', 'timing: c 1 ms']);
    expect(on.stderr).toContain('; x)');
    const off = run({ FLEXHELM_TIMINGS: '0' });
    expect(off.stderr).toBe('');
  });
});
