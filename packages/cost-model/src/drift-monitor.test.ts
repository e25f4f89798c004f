import { describe, expect, it } from 'vitest';
import { DriftMonitor, type DriftReport } from './drift-monitor.js';

describe('DriftMonitor', () => {
  const shape = (seq: number, pastLen: number) => ({ batch: 4, seq, pastLen });

  it('reports a phase once when its median step time drifts more than 50% from the prediction', () => {
    const reports: DriftReport[] = [];
    const monitor = new DriftMonitor(() => 10, { report: (r) => reports.push(r), minSteps: { prefill: 1, decode: 3 } });
    monitor.observe(shape(1, 5), 30);
    monitor.observe(shape(1, 6), 9);
    expect(reports).toEqual([]);
    monitor.observe(shape(1, 7), 31);
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ phase: 'decode', ratio: 3, predictedMs: 10, steps: 3 });
    for (let i = 0; i < 5; i++) monitor.observe(shape(1, 8 + i), 50);
    expect(reports).toHaveLength(1);
  });

  it('stays quiet within the threshold, and judges prefill separately (also too fast)', () => {
    const reports: DriftReport[] = [];
    const monitor = new DriftMonitor((s) => (s.seq > 1 ? 100 : 10), { report: (r) => reports.push(r), minSteps: { prefill: 1, decode: 2 } });
    monitor.observe(shape(1, 5), 14);
    monitor.observe(shape(1, 6), 7);
    expect(reports).toEqual([]);
    monitor.observe(shape(32, 0), 40);
    expect(reports).toEqual([expect.objectContaining({ phase: 'prefill', ratio: 0.4 })]);
  });
});
