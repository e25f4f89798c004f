import { describe, expect, it } from 'vitest';
import { alignedShardSize, planShards } from './shard-plan.js';

const keys = Array.from({ length: 23 }, (_, i) => `key${i}`);

describe('planShards', () => {
  it('covers every request once, in order, in shards of the given size', () => {
    const shards = planShards('m@1', 'mmlu:subject=anatomy,model=x', keys, 8);
    expect(shards.map((s) => [s.start, s.end])).toEqual([[0, 8], [8, 16], [16, 23]]);
    expect(shards.map((s) => s.index)).toEqual([0, 1, 2]);
  });

  it('gives deterministic job ids without `:` that change with the model, the run or the requests', () => {
    const a = planShards('m@1', 'run:a=1', keys, 8);
    expect(planShards('m@1', 'run:a=1', keys, 8)).toEqual(a);
    for (const s of a) expect(s.jobId).toMatch(/^shard-[0-9a-f]{40}$/);
    expect(new Set(a.map((s) => s.jobId)).size).toBe(3);
    expect(planShards('m@2', 'run:a=1', keys, 8)[0]!.jobId).not.toBe(a[0]!.jobId);
    expect(planShards('m@1', 'run:a=2', keys, 8)[0]!.jobId).not.toBe(a[0]!.jobId);
    expect(planShards('m@1', 'run:a=1', ['other', ...keys.slice(1)], 8)[0]!.jobId).not.toBe(a[0]!.jobId);
    expect(planShards('m@1', 'run:a=1', ['other', ...keys.slice(1)], 8)[1]!.jobId).toBe(a[1]!.jobId);
  });

  it('aligns the shard size with the engine batch', () => {
    expect(alignedShardSize(30, 8)).toBe(32);
    expect(alignedShardSize(32, 8)).toBe(32);
    expect(alignedShardSize(1, 12)).toBe(12);
    expect(() => alignedShardSize(0, 8)).toThrow(/positive integer/);
    expect(() => planShards('m', 'r', keys, 0)).toThrow(/positive integer/);
  });
});
