import { describeHfConfig, descriptionByName, resolveHubConfig } from '@flexhelm/engine';
import { modelShapeOfDescription, parsePolicy, percentsFromArgs, planMemory } from '@flexhelm/offload/plan';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BASE_RSS } from './check-predicted-fit.js';
import { predictPeakRss } from './predict-cost.js';

const GiB = 1024 ** 3;
const shapes = {
  'qwen2-0.5b': modelShapeOfDescription(describeHfConfig(resolveHubConfig('qwen2-0.5b').hf)),
  'llama-3.2-1b': modelShapeOfDescription(describeHfConfig(resolveHubConfig('llama-3.2-1b').hf)),
  'opt-1.3b': modelShapeOfDescription(descriptionByName('opt-1.3b')),
};

// Peak RSS (`Maximum resident set size`) of `flexhelm run -d synthetic_reasoning:mode=pattern_match -m 1 -t 1
// --gpu-batch-size 1 --pad-to-seq-len 256 --compute-dtype fp32` on make-model folders of these shapes, weights on the host
// tier (offload bench/RESULTS.md, 2026-12-02, policy-search bench/host-rss.mjs).
const measured: [keyof typeof shapes, string, number][] = [
  ['qwen2-0.5b', '0 100 100 0 100 0', 2.2],
  ['qwen2-0.5b', '30 70 100 0 100 0', 2.38],
  ['llama-3.2-1b', '0 100 100 0 100 0', 4.61],
  ['llama-3.2-1b', '30 70 100 0 100 0', 5.03],
  ['opt-1.3b', '0 100 100 0 100 0', 3.96],
  ['opt-1.3b', '30 70 100 0 100 0', 4.68],
];

describe('host-tier peak RSS: the planned RAM and the cost model against flexhelm run', () => {
  it.each(measured)('%s with --percent %s (measured %f GiB): both predictions at or above it, within 1.25×', (model, percents, peakGiB) => {
    const shape = shapes[model];
    const policy = parsePolicy({ ...percentsFromArgs(percents.split(' ')), gpuBatchSize: 1, numGpuBatches: 1 });
    const workload = { promptLen: 256, genLen: 50 };
    const plan = planMemory(shape, policy, workload);
    const peak = peakGiB * GiB;
    for (const predicted of [plan.ramBytes, predictPeakRss(shape, policy, plan, DEFAULT_BASE_RSS, undefined, workload)]) {
      expect(predicted / peak).toBeGreaterThanOrEqual(1);
      expect(predicted / peak).toBeLessThanOrEqual(1.25);
    }
  });
});
