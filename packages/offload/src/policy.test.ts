import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkOffloadDir, parsePolicy, percentsFromArgs, PolicyError, type PolicyInput } from './policy.js';

const base = { gpuBatchSize: 4, numGpuBatches: 2, ...percentsFromArgs(['20', '80', '0', '100', '0', '100']) };

describe('parsePolicy', () => {
  it('fills FlexLLMGen defaults', () => {
    const p = parsePolicy(base);
    expect(p).toMatchObject({ compressWeight: false, compressCache: false });
    expect(p.compWeightConfig).toEqual({ numBits: 4, groupSize: 64, groupDim: 0, symmetric: false });
    expect(p.compCacheConfig.groupDim).toBe(2);
  });

  it('explains every problem before any work starts', () => {
    const bad = () => parsePolicy({ ...base, gpuBatchSize: 0, wGpuPercent: 60, wCpuPercent: 50, actGpuPercent: 50, actCpuPercent: 50 });
    expect(bad).toThrow(PolicyError);
    try {
      bad();
    } catch (err) {
      const problems = (err as PolicyError).problems.join('\n');
      expect(problems).toMatch(/GPU batch size must be at least 1/);
      expect(problems).toMatch(/weights' compute-device and host percents add up to 110, over 100/);
      expect(problems).toMatch(/activations must live 100% on one tier/);
    }
    expect(() => parsePolicy({ ...base, wGpuPercent: -5 })).toThrow(/at least 0/);
    expect(() => parsePolicy({ ...base, compressCache: true, cacheGpuPercent: 50, cacheCpuPercent: 50 })).toThrow(/KV-cache compression needs the whole cache on one tier/);
  });

  it('accepts FlexLLMGen switches only at the one value the engine computes, and refuses the rest saying so', () => {
    expect(() => parsePolicy({ ...base, overlap: true, sepLayer: true, pinWeight: true, cpuCacheCompute: false, attnSparsity: 1 })).not.toThrow();
    const refused: [Partial<PolicyInput>, RegExp][] = [
      [{ overlap: false }, /^overlap: false is not implemented: the engine always loads the next streamed unit while the current one computes/],
      [{ sepLayer: false }, /^sepLayer: false is not implemented: attention and MLP are always separate streamed units/],
      [{ pinWeight: false }, /^pinWeight: false is not implemented: host-tier weights are always allocated pinned/],
      [{ cpuCacheCompute: true }, /^cpuCacheCompute: true \(--cpu-cache-compute\) is not implemented: there is no GPU/],
      [{ attnSparsity: 0.5 }, /^attnSparsity: values below 1 \(top-k sparse attention\) are not implemented/],
    ];
    for (const [over, message] of refused) {
      const err = (() => {
        try {
          parsePolicy({ ...base, ...over });
        } catch (e) {
          return e;
        }
      })();
      expect(err, JSON.stringify(over)).toBeInstanceOf(PolicyError);
      expect((err as PolicyError).problems, JSON.stringify(over)).toHaveLength(1);
      expect((err as PolicyError).problems[0], JSON.stringify(over)).toMatch(message);
    }
  });

  it('parses --percent strictly', () => {
    expect(() => percentsFromArgs(['1', '2'])).toThrow(/six numbers/);
    expect(() => percentsFromArgs(['1', '2', 'x', '4', '5', '6'])).toThrow(/value 3 \("x"\) is not a number/);
  });

  it('refuses an offload directory that cannot be written when the policy uses disk', () => {
    const p = parsePolicy({ ...base, ...percentsFromArgs([0, 50, 100, 0, 100, 0]) });
    const dir = mkdtempSync(join(tmpdir(), 'offload-'));
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    expect(() => checkOffloadDir(p, join(file, 'sub'))).toThrow(/offload directory .*a-file\/sub is not usable \(ENOTDIR\)/);
    expect(() => checkOffloadDir(p, join(dir, 'sub'))).not.toThrow();
    // A writable file passes an access check, but the engine cannot make its folder inside it.
    expect(() => checkOffloadDir(p, file)).toThrow(new RegExp(`offload directory ${file} is not usable \\(it is a file, not a folder\\); pass --offload-dir with a writable folder`));
    chmodSync(dir, 0o500);
    // root can write anywhere; only assert for ordinary users
    if (process.getuid?.() !== 0) expect(() => checkOffloadDir(p, dir)).toThrow(/not usable/);
  });
});
