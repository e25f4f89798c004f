import { describe, expect, it } from 'vitest';
import { parseServerArgs } from './server-args.js';

describe('parseServerArgs connection limits', () => {
  it('defaults to sane limits and takes each flag', () => {
    expect(parseServerArgs([], {})).toMatchObject({ headersTimeoutMs: 10_000, bodyTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000, maxConnections: 256 });
    const a = parseServerArgs(['--headers-timeout-ms', '2000', '--body-timeout-ms', '4000', '--keep-alive-timeout-ms', '700', '--max-connections', '9'], {});
    expect(a).toMatchObject({ headersTimeoutMs: 2000, bodyTimeoutMs: 4000, keepAliveTimeoutMs: 700, maxConnections: 9 });
    expect(parseServerArgs([], {}).maxStreamBufferBytes).toBe(4 * 1024 * 1024);
    expect(parseServerArgs(['--max-stream-buffer', '65536'], {}).maxStreamBufferBytes).toBe(65536);
  });

  it('refuses values that would disable a limit or that Node cannot honour', () => {
    expect(() => parseServerArgs(['--body-timeout-ms', '0'], {})).toThrow("--body-timeout-ms must be an integer ≥ 100, got '0'");
    expect(() => parseServerArgs(['--max-connections', '0'], {})).toThrow("--max-connections must be an integer ≥ 1, got '0'");
    expect(() => parseServerArgs(['--max-stream-buffer', '10'], {})).toThrow("--max-stream-buffer must be an integer ≥ 1024, got '10'");
    expect(() => parseServerArgs(['--headers-timeout-ms', '5000', '--body-timeout-ms', '1000'], {})).toThrow('--headers-timeout-ms (5000) must not exceed --body-timeout-ms (1000)');
  });
});

describe('parseServerArgs policy', () => {
  it('takes --percent auto as flexhelm run does: the placement and the unset batch sizes are searched when the model opens', () => {
    const args = parseServerArgs(['--percent', 'auto', '--num-gpu-batches', '2']);
    expect(args.policyRequest).toMatchObject({ percent: 'auto', gpuBatchSize: undefined, numGpuBatches: '2' });
    // Known only after the search: the server then batches gpu_batch_size × num_gpu_batches rows.
    expect(args.maxBatchSize).toBeUndefined();
    expect(parseServerArgs(['--percent', 'auto', '--max-batch-size', '6']).maxBatchSize).toBe(6);
  });

  it('keeps its defaults without auto: everything resident, 8 sequences per call', () => {
    const args = parseServerArgs([]);
    expect(args.policy).toMatchObject({ wGpuPercent: 100, cacheGpuPercent: 100, actGpuPercent: 100, gpuBatchSize: 8, numGpuBatches: 1 });
    expect(args.maxBatchSize).toBe(8);
    expect(() => parseServerArgs(['--percent', '50', '60', '100', '0', '100', '0'])).toThrow(/percent/);
    expect(() => parseServerArgs(['--gpu-batch-size', 'x'])).toThrow("--gpu-batch-size must be an integer ≥ 1, got 'x'");
  });
});
