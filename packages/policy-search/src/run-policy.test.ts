import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeHfConfig, resolveHubConfig } from '@flexhelm/engine';
import { parsePolicy } from '@flexhelm/offload';
import { runPolicy } from './run-policy.js';

const offloadDir = mkdtempSync(join(tmpdir(), 'flexhelm-run-policy-'));
afterAll(() => rmSync(offloadDir, { recursive: true, force: true }));

describe('runPolicy', () => {
  it('measures a run of a model whose description is tens of kilobytes (a mixture of 60 experts) on onnxruntime', () => {
    // Qwen1.5-MoE-A2.7B's layout at tiny widths: 60 experts make ~200 layer tensors, a ~22 KB description. Passed on
    // the command line, it crashed the child inside onnxruntime's set-up (SIGSEGV), failing `--percent auto`.
    const hf = resolveHubConfig({ base: 'qwen1.5-moe-a2.7b', num_hidden_layers: 1, hidden_size: 64, intermediate_size: 128, moe_intermediate_size: 32, shared_expert_intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 512 }).hf;
    const description = describeHfConfig(hf, 'qwen-moe-tiny');
    expect(JSON.stringify(description).length).toBeGreaterThan(20_000);
    const policy = parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, wGpuPercent: 100, wCpuPercent: 0, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0 });
    const r = runPolicy({ description, policy, promptLen: 8, genLen: 3, offloadDir, backend: 'onnxruntime-fp32' });
    expect(r.prefillMs).toBeGreaterThan(0);
    expect(r.decodeStepMs).toBeGreaterThan(0);
    expect(r.totalMs).toBeCloseTo(r.prefillMs + 2 * r.decodeStepMs, 6);
    expect(r.peakRssBytes).toBeGreaterThan(0);
  });
});
