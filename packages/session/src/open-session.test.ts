import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '@flexhelm/core';
import { makeModel } from '@flexhelm/engine';
import { RequestCacheError } from '@flexhelm/request-cache';
import { writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import { defaultCachePath } from './model-names.js';
import { computeDtypeRefusal } from './decide-backend.js';
import { checkSessionOptions, openSession, type SessionOptions } from './open-session.js';
import { OptionError } from './policy-request.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-session-'));
const modelDir = join(root, 'tiny-opt');
afterAll(() => rmSync(root, { recursive: true, force: true }));

beforeAll(() => {
  makeModel({ config: { hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 2, vocabSize: 50272 }, outDir: modelDir, seed: 5, beforeCommit: (d) => writeOptShapedTokenizerFolder(d) });
}, 120_000);

const base = (over: Partial<SessionOptions> = {}): SessionOptions => ({
  model: 'local/tiny-opt',
  path: modelDir,
  dataDir: join(root, 'data'),
  offline: true,
  policy: { percent: '100 0 100 0 100 0', gpuBatchSize: '2' },
  percentDefault: 'resident',
  computeDtype: 'fp32',
  maxRamGiB: 4,
  workload: (description, pad) => ({ promptLen: pad ?? Math.min(64, description.maxPositions - 8), genLen: 8, numSequences: 4 }),
  cachePath: defaultCachePath(join(root, 'out'), 'local/tiny-opt'),
  ...over,
});

describe('openSession', () => {
  it('opens a fixed-policy session whose executor computes and caches, and closes everything once', async () => {
    const lines: string[] = [];
    const session = await openSession(base({ log: (l) => lines.push(l) }));
    try {
      expect(session.helmModel).toBe('local/tiny-opt');
      expect(session.policy.gpuBatchSize).toBe(2);
      expect(session.modelId).toMatch(/^local\/tiny-opt@[0-9a-f]+\/onnxruntime/);
      expect(session.cache).toBeDefined();
      expect(lines.some((l) => l.startsWith('backend: onnxruntime fp32'))).toBe(true);
      const [result] = await session.executor.execute([request({ prompt: 'The capital of France is', max_tokens: 3, temperature: 0 })]);
      expect(result!.success).toBe(true);
      expect(result!.completions[0]!.tokens).toHaveLength(3);
      expect(existsSync(join(root, 'out', 'cache', 'local_tiny-opt.sqlite'))).toBe(true);
    } finally {
      await session.close();
      await session.close(); // idempotent: every exit path may call it
    }
  }, 120_000);

  it('reports bad option values before it touches the model', async () => {
    const err = await openSession(base({ path: join(root, 'missing'), policy: { percent: '100 0 100 0 100', gpuBatchSize: '2' } })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OptionError);
    expect((err as Error).message).toMatch(/percent/);
    const dtype = await openSession(base({ path: join(root, 'missing'), computeDtype: 'fp16' })).catch((e: unknown) => e);
    expect((dtype as Error).message).toBe("--compute-dtype takes auto, fp32, bf16 or int8, got 'fp16'");
  });

  it('refuses switches the engine does not implement, in one line naming the flag', () => {
    const check = (policy: SessionOptions['policy']) => () => checkSessionOptions(base({ policy }));
    expect(check({ percent: '100 0 100 0 100 0', cpuCacheCompute: true })).toThrow(new OptionError('--cpu-cache-compute is not implemented: there is no GPU, so attention always runs on the CPU; leave the flag out'));
    expect(check({ percent: '100 0 100 0 100 0', pinWeight: false })).toThrow(/^--pin-weight false is not implemented: host-tier weights are always pinned/);
    // --pin-weight states what the engine does (FlexLLMGen's default) and is accepted.
    expect(check({ percent: '100 0 100 0 100 0', pinWeight: true })).not.toThrow();
  });

  it('runs --compute-dtype int8 only when FLEXHELM_EXPERIMENTAL_INT8=1 opts in', () => {
    expect(computeDtypeRefusal('int8', {})).toBe('--compute-dtype int8 is experimental (its logprobs fail the accuracy gate); set FLEXHELM_EXPERIMENTAL_INT8=1 to opt in, or use bf16');
    expect(computeDtypeRefusal('int8', { FLEXHELM_EXPERIMENTAL_INT8: '0' })).toMatch(/set FLEXHELM_EXPERIMENTAL_INT8=1 to opt in/);
    expect(computeDtypeRefusal('int8', { FLEXHELM_EXPERIMENTAL_INT8: '1' })).toBeUndefined();
    expect(computeDtypeRefusal('bf16', {})).toBeUndefined();
    const previous = process.env.FLEXHELM_EXPERIMENTAL_INT8;
    delete process.env.FLEXHELM_EXPERIMENTAL_INT8;
    try {
      expect(() => checkSessionOptions(base({ computeDtype: 'int8' }))).toThrow(OptionError);
      process.env.FLEXHELM_EXPERIMENTAL_INT8 = '1';
      expect(checkSessionOptions(base({ computeDtype: 'int8' })).computeDtype).toBe('int8');
    } finally {
      if (previous === undefined) delete process.env.FLEXHELM_EXPERIMENTAL_INT8;
      else process.env.FLEXHELM_EXPERIMENTAL_INT8 = previous;
    }
  });

  it('refuses a damaged cache before the engine opens', async () => {
    const cachePath = join(root, 'damaged.sqlite');
    writeFileSync(cachePath, 'not a database, '.repeat(100));
    const err = await openSession(base({ cachePath })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestCacheError);
    expect((err as Error).message).toMatch(/damaged\.sqlite/);
  });
});
