import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeHfConfig, parameterCounts, ReferenceBackend } from '@flexhelm/engine';
import { afterAll, describe, expect, it } from 'vitest';
import { planMemory } from './memory-plan.js';
import { modelShapeOfDescription } from './model-shape.js';
import { OffloadingBackend } from './offloading-backend.js';
import { parsePolicy, percentsFromArgs } from './policy.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-moe-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A small Mixtral: every layer sparse, 4 experts of 48, untied head.
const mixtral = describeHfConfig({ model_type: 'mixtral', vocab_size: 100, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48, num_local_experts: 4, max_position_embeddings: 64 });
const policy = (percent: number[]) => parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, ...percentsFromArgs(percent) });

describe('a mixture of experts under offloading (not computed yet)', () => {
  it('is refused at init, naming the kind, until the tiers stream experts', async () => {
    const backend = new OffloadingBackend(new ReferenceBackend(), policy([0, 50, 100, 0, 100, 0]), { offloadDir: join(dir, 'run') });
    await expect(backend.init(mixtral)).rejects.toThrow('offloading does not compute mlp:moe yet (mixtral is a mixtral model)');
  });

  it("the memory plan sizes every expert: all weights on host in f16 are twice the model's total parameters", () => {
    const plan = planMemory(modelShapeOfDescription(mixtral), policy([0, 100, 100, 0, 100, 0]), { promptLen: 8, genLen: 4 });
    const { total, active } = parameterCounts(mixtral);
    expect(plan.weights.host).toBe(2 * total);
    // 2 of 4 experts a token: the experts are 3 · 32 · 48 values each, per layer.
    expect(total - active).toBe(2 * 2 * 3 * 32 * 48);
  });
});
