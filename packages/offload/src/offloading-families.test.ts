import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LlamaCheckpoint, openTensorSource, readModelDescription } from '@flexhelm/engine';
import { afterAll, describe, expect, it } from 'vitest';
import { planMemory } from './memory-plan.js';
import { modelShapeOfDescription } from './model-shape.js';
import { parsePolicy, percentsFromArgs } from './policy.js';
import { WeightTierStore } from './weight-tier-store.js';

// The golden checkpoints of the new families (transformers 4.47.1, float32; every weight exact in f16): Gemma 2 (head_dim
// 12 with hidden 48, four norms, tied head), Phi-3 (fused qkv_proj and gate_up_proj, split by the checkpoint reader) and
// OLMo 2 (q/k norms, post-branch norms).
const goldens = resolve(__dirname, '../../../../shared/conformance/families');
const families = ['gemma2-a', 'phi3-a', 'olmo2-a'].filter((f) => existsSync(join(goldens, f, 'f32')));
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-families-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const policy = (percent: number[]) => parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, ...percentsFromArgs(percent) });

describe.skipIf(families.length === 0).each(families)('offloading tiers of the %s golden checkpoint', (family) => {
  const folder = join(goldens, family, 'f32');

  it("streams every tensor the description lists from host and disk and reads each back exactly; the plan's sizes are the store's", async () => {
    const d = readModelDescription(folder);
    const checkpoint = new LlamaCheckpoint(d, openTensorSource(folder));
    try {
      for (const percent of [[0, 100, 100, 0, 100, 0], [0, 0, 100, 0, 100, 0], [0, 50, 100, 0, 100, 0]]) {
        const p = policy(percent);
        const store = new WeightTierStore(d, p, { diskBytesRead: 0, diskReadMs: 0 }, join(dir, `${family}-${percent[1]}`), false);
        try {
          for (let i = 0; i < d.layers; i++) {
            const layer = checkpoint.layer(i);
            // Fused checkpoints arrive split: the tensors are the description's keys with its shapes.
            expect(Object.keys(layer).sort()).toEqual(d.layerTensors.map((t) => t.key).sort());
            const placed = await store.placeLayer(i, layer);
            expect(placed.streamed).toBe(true);
            const back = await store.readLayer(i);
            for (const t of d.layerTensors) expect(back[t.key], `${family} layer ${i} ${t.key}`).toEqual(layer[t.key]);
          }
          if (percent[1] === 100) {
            // All on host in f16: the plan's host weights are the store's layers plus the token table and the head's
            // own copy (its norm and table, tied or not).
            const plan = planMemory(modelShapeOfDescription(d), p, { promptLen: 8, genLen: 4 });
            const H = d.hiddenSize;
            expect(plan.weights.host).toBe(store.summary().bytes.host + (d.vocabSize * H + H + d.vocabSize * H) * 2);
          }
        } finally {
          store.close();
        }
      }
    } finally {
      checkpoint.close();
    }
  });
});
