import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generate, makeHubModel, makeModelDescription, optHfConfig, readFolderModel, readModelDescription } from '@flexhelm/engine';
import { exportGguf, importGguf } from '@flexhelm/gguf';
import { writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { parsePolicy } from '@flexhelm/offload';
import { EngineSetupError } from '@flexhelm/runner';
import { oneDnnUsability } from './decide-backend.js';
import { openEngine } from './open-engine.js';
import { planShape } from './plan-shape.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-open-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('openEngine', () => {
  it('checks the memory plan against the budget before it reads or allocates any weight', async () => {
    // Every size within the config bounds, yet ~1.6 TB of weights; the weights file is garbage, so reaching it would fail
    // with a different error.
    const folder = join(dir, 'giant');
    mkdirSync(folder);
    const big = makeModelDescription({ base: 'opt-175b', name: 'giant', numHiddenLayers: 1024, hiddenSize: 16384, numAttentionHeads: 128, ffnDim: 65536, wordEmbedProjDim: 12288 });
    writeFileSync(join(folder, 'config.json'), JSON.stringify(optHfConfig(big, 'float16')));
    writeFileSync(join(folder, 'model.safetensors'), 'not a safetensors file');
    const description = readFolderModel(folder);
    const policy = parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, wGpuPercent: 100, wCpuPercent: 0, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0 });
    const rss = process.memoryUsage().rss;
    const started = Date.now();
    const err = await openEngine({ model: 'giant', folder, description, policy, offloadDir: join(dir, 'offload'), maxRam: 8 * 2 ** 30, workload: { promptLen: 16, genLen: 4 } }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(EngineSetupError);
    expect(err!.message).toMatch(/the offloading plan does not fit: needs [\d.]+ GiB of RAM but the budget is 8(\.0+)? GiB/);
    // Nothing was read (the garbage weights would have failed otherwise) or sized from the model: one layer of it alone
    // is 12 GiB. The RSS bound leaves room for the lazily loaded backend code and the collector (seen: +160 MiB in a
    // full CI run), and the time bound is generous for a loaded 2-core machine.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(process.memoryUsage().rss - rss).toBeLessThan(1024 * 2 ** 20);
  });

  it.each([[100, 'all weights resident'], [50, 'half the weights streamed']] as const)('opens a family the fast backends may not compute yet on one that does (%i: %s)', async (wg, _what) => {
    // Gemma 2's kinds (soft-caps, sandwich norms, GeGLU): a backend whose init refuses them hands over to the next one
    // (oneDNN → onnxruntime → reference), saying so; the engine then computes as the reference does.
    const folder = join(dir, `gemma2-${wg}`);
    makeHubModel({ config: { base: 'gemma-2-2b', hidden_size: 32, num_attention_heads: 2, num_key_value_heads: 1, num_hidden_layers: 2, intermediate_size: 64, vocab_size: 400 }, outDir: folder, dtype: 'f32' });
    const description = readModelDescription(folder);
    const policy = parsePolicy({ gpuBatchSize: 1, numGpuBatches: 1, wGpuPercent: wg, wCpuPercent: 100 - wg, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0 });
    const log: string[] = [];
    const opened = await openEngine({ model: 'gemma2', folder, description, policy, offloadDir: join(dir, 'offload'), maxRam: 2 ** 30, workload: { promptLen: 8, genLen: 2 }, computeDtype: 'fp32', log: (l) => log.push(l) });
    try {
      const fellBack = log.filter((l) => / computing with reference instead$/.test(l));
      if (fellBack.length > 0) {
        expect(fellBack[0]).toMatch(/^backend: onnxruntime does not compute .*norm:rmsnorm-plus-one.* \(.* is a gemma2 model\); computing with reference instead$/);
        expect(opened.modelId).toMatch(/reference\)?$/);
      }
      const [out] = await generate(opened.engine, [{ prompt: [2, 10, 11, 12], maxNewTokens: 3, stopAtEos: false }]);
      expect(out!.completions[0]!.tokens).toHaveLength(3);
    } finally {
      await opened.engine.close();
    }
  }, 120_000);

  it.skipIf(!oneDnnUsability().usable)('a GGUF file on oneDNN: its blocks resident, or streamed from disk as stored — the same tokens and logprobs', async () => {
    const hub = join(dir, 'gguf-hub');
    makeHubModel({ config: { base: 'llama-3.2-1b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 700 }, outDir: hub, seed: 4, tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o) });
    const gguf = join(dir, 'tiny-q4_0.gguf');
    exportGguf({ folder: hub, out: gguf, type: 'Q4_0' });
    const { folder, description } = importGguf(gguf, join(dir, 'gguf-data'));
    const run = async (percents: [number, number]) => {
      const policy = parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, wGpuPercent: percents[0], wCpuPercent: percents[1], cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0 });
      const log: string[] = [];
      const workload = { promptLen: 8, genLen: 4 };
      const opened = await openEngine({ model: 'tiny-q4_0', folder, gguf, description, shape: planShape(description, gguf, 'auto'), policy, offloadDir: join(dir, 'offload'), maxRam: 2 ** 30, workload, log: (l) => log.push(l) });
      try {
        const out = await generate(opened.engine, [{ prompt: [1, 10, 11, 12, 13], maxNewTokens: 4, stopAtEos: false, topLogprobs: 2 }, { prompt: [1, 99, 98], maxNewTokens: 4, stopAtEos: false, topLogprobs: 2 }]);
        return { log, completions: out.map((r) => r.completions[0]), modelId: opened.modelId, plan: opened.plan };
      } finally {
        await opened.engine.close();
      }
    };
    const resident = await run([100, 0]);
    const disk = await run([0, 0]);
    expect(resident.log.some((l) => /15 Q4_0 matrices of .* multiplied as stored \(ggml blocks\), not widened$/.test(l))).toBe(true);
    expect(disk.log.some((l) => /multiplied as stored \(ggml blocks\), not widened, streamed as blocks$/.test(l))).toBe(true);
    for (const run of [resident, disk]) expect(run.log.some((l) => /^backend: oneDNN .*, dtype auto: fp32 around the ggml blocks$/.test(l))).toBe(true);
    expect(disk.log.some((l) => /^layer weights: .*disk [\d.]+ MiB \(18 tensors, f16\/4-bit or ggml blocks files\); 2 streamed and 0 resident layers; the token table and the output head stay in the compute backend/.test(l))).toBe(true);
    expect(disk.completions).toEqual(resident.completions);
    // Both compute on the blocks (a request cache keeps them apart from widened runs), and the disk plan counts them.
    expect(resident.modelId).toMatch(/\+ggml-blocks$/);
    expect(disk.modelId).toMatch(/\+ggml-blocks$/);
    const f16Matrices = 2 * 2 * (64 * (64 + 2 * 32) + 64 * 64 + 3 * 64 * 96);
    expect(disk.plan.weights.disk).toBeLessThan(f16Matrices / 3);
  }, 120_000);
});
