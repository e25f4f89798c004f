import { describe, expect, it } from 'vitest';
import { ProgressReporter } from './progress-reporter.js';

/** A terminal of `columns` columns (0: one that does not know its width) that records what is written to it. */
function terminal(columns: number) {
  const written: string[] = [];
  const out = { isTTY: true, columns, write: (s: string) => written.push(s) > 0 } as unknown as NodeJS.WritableStream & { isTTY: boolean; columns: number };
  /** The text of every redrawn line, newest last. */
  const lines = () => written.join('').replaceAll('\r\u001b[2K', '\n').split('\n').filter((l) => l.length > 0);
  return { out, written, lines };
}

const runName = 'synthetic_reasoning:mode=pattern_match,model=local_qwen2-0.5b-instruct,max_train_instances=5';
const progress = (done: number, cachedHits = 0) => ({ runName, phase: 'execute' as const, progress: { done, total: 1000, generatedTokens: done * 50, cachedHits } });

describe('ProgressReporter on a terminal', () => {
  for (const columns of [40, 80, 200]) {
    it(`keeps the counts, the rate and the ETA visible at ${columns} columns, within the width`, async () => {
      const t = terminal(columns);
      const r = new ProgressReporter(t.out);
      r.event({ runName, phase: 'execute', progress: { done: 0, total: 1000, generatedTokens: 0, cachedHits: 0 } });
      await new Promise((done) => setTimeout(done, 20));
      r.event(progress(250, 100));
      const line = t.lines().at(-1)!;
      expect(line.length).toBeLessThanOrEqual(columns - 1);
      expect(line).toMatch(/250\/1000/);
      expect(line).toMatch(/[\d.]+ tok\/s/);
      expect(line).toMatch(/(ETA )?\d+ s$/);
      // The run name is what gives way: its start and its end stay.
      expect(line.startsWith(columns === 200 ? runName : 'synth')).toBe(true);
      if (columns === 200) expect(line).toMatch(/execute \[######\.+\] 250\/1000 requests \(100 from cache\), [\d.]+ tok\/s, ETA \d+ s$/);
      if (columns === 80) expect(line).toMatch(/^synthetic_.*….*: .*250\/1000.*tok\/s.*ETA \d+ s$/);
    });
  }

  it('fits an unknown width (0 columns) as 80 columns instead of cutting the line to a stub', () => {
    const t = terminal(0);
    const r = new ProgressReporter(t.out);
    r.event(progress(3));
    const line = t.lines().at(-1)!;
    expect(line.length).toBeGreaterThan(40);
    expect(line.length).toBeLessThanOrEqual(79);
    expect(line).toMatch(/3\/1000.*tok\/s.*ETA/);
  });

  it('shortens a phase line’s run name before its message, and ends an open line before another message', () => {
    const t = terminal(60);
    const r = new ProgressReporter(t.out);
    r.event({ runName, phase: 'metrics' });
    expect(t.lines().at(-1)).toMatch(/^synth.*….*: metrics$/);
    expect(t.lines().at(-1)!.length).toBeLessThanOrEqual(59);
    r.endLine();
    expect(t.written.at(-1)).toBe('\n');
    // Nothing open any more: no second newline (no empty line before the next message).
    r.endLine();
    expect(t.written.filter((w) => w === '\n')).toHaveLength(1);
  });
});

describe('ProgressReporter in a log (not a terminal)', () => {
  it('writes whole lines with the full run name', () => {
    const written: string[] = [];
    const r = new ProgressReporter({ write: (s: string) => written.push(s) > 0 } as unknown as NodeJS.WritableStream);
    r.event(progress(1000));
    expect(written).toHaveLength(1);
    expect(written[0]).toMatch(new RegExp(`^${runName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: execute \\[#{24}\\] 1000/1000 requests, [\\d.]+ tok/s, ETA 0 s\\n$`));
  });
});
