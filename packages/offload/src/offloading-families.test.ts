import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Engine, generate, LlamaCheckpoint, openTensorSource, readModelDescription, ReferenceBackend, type DecoderBackend } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { afterAll, describe, expect, it } from 'vitest';
import { planMemory } from './memory-plan.js';
import { OffloadingBackend } from './offloading-backend.js';
import { modelShapeOfDescription } from './model-shape.js';
import { parsePolicy, percentsFromArgs } from './policy.js';
import { WeightTierStore } from './weight-tier-store.js';

// The golden checkpoints (transformers 4.47.1, float32; every weight exact in f16) of the new families — Gemma 2 (head_dim
// 12 with hidden 48, four norms, tied head), Phi-3 (fused qkv_proj and gate_up_proj, split by the checkpoint reader),
// OLMo 2 (q/k norms, post-branch norms) — and of Llama and Mistral, which the reference computes already.
const conformance = resolve(__dirname, '../../../../shared/conformance');
const families = ['families/gemma2-a', 'families/phi3-a', 'families/olmo2-a', 'llama/llama-a', 'llama/mistral-a'].filter((f) => existsSync(join(conformance, f, 'f32')));
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-offload-families-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const policy = (percent: number[]) => parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, ...percentsFromArgs(percent) });

describe.skipIf(families.length === 0).each(families)('offloading tiers of the %s golden checkpoint', (family) => {
  const folder = join(conformance, family, 'f32');

  it("streams every tensor the description lists from host and disk and reads each back exactly; the plan's sizes are the store's", async () => {
    const d = readModelDescription(folder);
    const checkpoint = new LlamaCheckpoint(d, openTensorSource(folder));
    try {
      for (const percent of [[0, 100, 100, 0, 100, 0], [0, 0, 100, 0, 100, 0], [0, 50, 100, 0, 100, 0]]) {
        const p = policy(percent);
        const store = new WeightTierStore(d, p, { diskBytesRead: 0, diskReadMs: 0 }, join(dir, `${family.replace('/', '-')}-${percent[1]}`), false);
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
  it('computes offloaded (weights on host and disk, micro-batches of 2) as the resident reference does, once the reference computes the kinds', async (ctx) => {
    const golden = JSON.parse(readFileSync(join(conformance, family, 'golden.json'), 'utf8')) as { prompts: number[][]; echo: { prompt_token_logprobs: (number | null)[][] } };
    const requests = golden.prompts.map((prompt) => ({ prompt, maxNewTokens: 4, topLogprobs: 2, echoPrompt: true }));
    const run = async (backend: DecoderBackend) => {
      const engine = await Engine.load(folder, { backend });
      try {
        return (await generate(engine, requests, { maxBatchSize: 4 })).map((r) => r.completions[0]!);
      } finally {
        await engine.close();
      }
    };
    let resident: Awaited<ReturnType<typeof run>>;
    try {
      resident = await run(new ReferenceBackend());
    } catch (err) {
      return ctx.skip(`the reference backend does not compute ${family} yet: ${(err as Error).message}`);
    }
    // The resident reference is the yardstick only where it reproduces transformers' prompt logprobs (fp32 tolerance).
    const echoDiff = Math.max(...golden.echo.prompt_token_logprobs.flatMap((row, i) => row.map((x, j) => (x === null ? 0 : Math.abs(x - (resident[i]!.promptTokens![j]!.logprob ?? 0))))));
    if (!(echoDiff < 1e-4)) return ctx.skip(`the reference backend does not compute ${family} yet (prompt logprobs ${echoDiff} from the golden)`);
    const offloaded = await run(new OffloadingBackend(new ReferenceBackend(), parsePolicy({ gpuBatchSize: 2, numGpuBatches: 2, ...percentsFromArgs([0, 50, 100, 0, 100, 0]) }), { offloadDir: join(dir, 'run') }));
    const values = (cs: typeof resident) => cs.flatMap((c) => [...c.promptTokens!, ...c.tokens].flatMap((t) => [t.id, t.logprob ?? 0, ...t.top.map((x) => x.logprob)]));
    expect(values(offloaded)).toEqual(values(resident));
    // onnxruntime's streamed layers (weights fed as graph inputs, the same layer builder as its resident stages) under
    // the same policy: the reference's tokens, log-probs within check.md's float32 tolerance.
    const ort = await run(new OffloadingBackend(new OrtBackend(), parsePolicy({ gpuBatchSize: 2, numGpuBatches: 2, ...percentsFromArgs([0, 50, 100, 0, 100, 0]) }), { offloadDir: join(dir, 'run-ort') }));
    expect(ort.map((c) => c.tokens.map((t) => t.id))).toEqual(resident.map((c) => c.tokens.map((t) => t.id)));
    const a = values(ort);
    const b = values(resident);
    expect(a.length).toBe(b.length);
    expect(Math.max(...a.map((x, i) => Math.abs(x - b[i]!)))).toBeLessThan(1e-4);
  });
});
