import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate, isOwnTensor, type DecoderBackend, type Engine, type StreamedLayerTensors } from '@flexhelm/engine';
import { ggufQuantizedWeights } from '@flexhelm/gguf';
import { formatTierSummary, OffloadingBackend, parsePolicy, percentsFromArgs } from '@flexhelm/offload';
import { afterAll, describe, expect, it } from 'vitest';
import { oneDnnStatus } from './native-addon.js';
import { OneDnnBackend } from './onednn-backend.js';
import { makeGguf, type MadeGguf, type MadeGgufType } from './test-made-gguf.js';

const available = oneDnnStatus().available;
const root = mkdtempSync(join(tmpdir(), 'flexhelm-streamed-blocks-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const made = new Map<MadeGgufType, MadeGguf>();
function madeGguf(type: MadeGgufType): MadeGguf {
  if (!made.has(type)) made.set(type, makeGguf(root, type));
  return made.get(type)!;
}

const prompts = [
  [1, 17, 250, 33, 4, 99, 7, 8, 9, 10, 11, 12, 13],
  [1, 150, 151, 3, 299],
];

/** Weights on host (FlexGen w0 100), on disk, and split 20 / 50 / 30 (a layer's matrices on all three tiers). */
const POLICIES = { host: [0, 100, 100, 0, 100, 0], disk: [0, 0, 100, 0, 100, 0], split: [20, 50, 100, 0, 100, 0] } as const;

function offloaded(inner: DecoderBackend, percents: readonly number[]): OffloadingBackend {
  const policy = parsePolicy({ gpuBatchSize: 2, numGpuBatches: 1, ...percentsFromArgs([...percents]) });
  return new OffloadingBackend(inner, policy, { offloadDir: join(root, 'offload'), direct: false });
}

/** Greedy completions of 6 tokens with their logprobs and the top 3 of each position. */
async function completions(engine: Engine) {
  const r = await generate(engine, prompts.map((prompt) => ({ prompt, maxNewTokens: 6, stopAtEos: false, topLogprobs: 3 })));
  return r.map((x) => x.completions[0]!);
}

/** Whether a GGUF tensor name is one of a layer's weight matrices (not a norm). */
const layerMatrix = (name: string) => /layers\.\d+\./.test(name) && !/norm/.test(name);

describe.skipIf(!available)('a GGUF file\'s blocks streamed by the offloading tiers as stored (issue 30)', () => {
  it.each(['Q4_0', 'Q8_0', 'Q4_K_M'] as const)('%s: host, disk and split weights give exactly the resident blocks\' tokens and logprobs; the tiers hold the blocks, never a widened copy', { timeout: 180_000 }, async (type) => {
    const { file, description, load, reads } = madeGguf(type);
    const quantized = ggufQuantizedWeights(file, description);
    const resident = await load(new OneDnnBackend({ dtype: 'auto', quantized, onNotice: () => {} }));
    const expected = await completions(resident);
    await resident.close();
    // What the blocks take against the f16 copies the tiers held before: every layer's matrices.
    let blockBytes = 0;
    for (let i = 0; i < description.layers; i++) for (const b of Object.values(quantized.layerBytes(i))) blockBytes += b;
    const f16Bytes = 2 * description.layerTensors.filter((t) => t.shape.length === 2).reduce((sum, t) => sum + t.shape[0]! * t.shape[1]!, 0) * description.layers;
    for (const [name, percents] of Object.entries(POLICIES)) {
      reads.length = 0;
      const inner = new OneDnnBackend({ dtype: 'auto', quantized, onNotice: () => {} });
      const backend = offloaded(inner, percents);
      const engine = await load(backend);
      try {
        expect(await completions(engine), name).toEqual(expected);
        // No layer matrix was read from the file widened: the backend's stored forms went to the tiers.
        expect(reads.filter(layerMatrix), name).toEqual([]);
        const s = backend.summary();
        expect(s.streamedLayers, name).toBe(description.layers);
        // Every layer matrix is a stored form (7 a layer); the log line says so, and where the token table went.
        expect(s.ownTensors, name).toBe(7 * description.layers);
        expect(formatTierSummary(s), name).toMatch(/f16\/4-bit or ggml blocks in pinned RAM.*the token table and the output head stay in the compute backend as stored in the file/);
        // Split: a streamed layer's matrices on every tier (those on the compute tier resident in the stored form).
        if (name === 'split') expect([s.tensors.compute, s.tensors.host, s.tensors.disk].every((n) => n > 0)).toBe(true);
        // The same placement with widened weights, every matrix on its tier as f16: the blocks replace them byte for byte.
        const widened = offloaded(new OneDnnBackend({ dtype: 'fp32' }), percents);
        const plain = await load(widened);
        const w = widened.summary();
        await plain.close();
        const total = (t: typeof s) => t.bytes.compute + t.bytes.host + t.bytes.disk;
        const offCompute = (t: typeof s) => t.bytes.host + t.bytes.disk;
        // And the token table stays with the backend in the file's type (rows widened on use), where the widened run
        // kept an f16 copy on the weights' tier (an f16 rounding of the values the blocks stand for).
        const f16Table = 2 * description.vocabSize * description.hiddenSize;
        if (name !== 'split') expect(offCompute(w) - offCompute(s), name).toBe(f16Bytes - blockBytes + f16Table);
        expect(total(s), name).toBeLessThan(total(w));
      } finally {
        await engine.close();
      }
    }
  });

  it('stored blocks that arrive misaligned are copied, with the same results; a form the backend did not make is refused', { timeout: 120_000 }, async () => {
    const { file, description, load } = madeGguf('Q4_0');
    const quantized = ggufQuantizedWeights(file, description);
    const resident = await load(new OneDnnBackend({ dtype: 'auto', quantized, onNotice: () => {} }));
    const expected = await completions(resident);
    await resident.close();
    const shifted = (w: StreamedLayerTensors, format?: string): StreamedLayerTensors =>
      Object.fromEntries(
        Object.entries(w).map(([k, t]) => {
          if (!isOwnTensor(t)) return [k, t];
          const copy = new Uint8Array(t.bytes.byteLength + 1).subarray(1);
          copy.set(t.bytes);
          return [k, { format: format ?? t.format, bytes: copy }];
        }),
      );
    const withSetLayer = async (change: (w: StreamedLayerTensors) => StreamedLayerTensors) => {
      const inner = new OneDnnBackend({ dtype: 'auto', quantized, onNotice: () => {} });
      const streamed = inner.streamedLayers as { setLayer: (typeof inner.streamedLayers)['setLayer'] };
      const original = streamed.setLayer;
      streamed.setLayer = (index, weights, experts) => original(index, change(weights), experts);
      return load(offloaded(inner, POLICIES.host));
    };
    const misaligned = await withSetLayer((w) => shifted(w));
    try {
      expect(await completions(misaligned)).toEqual(expected);
    } finally {
      await misaligned.close();
    }
    const foreign = await withSetLayer((w) => shifted(w, 'f16-rows'));
    try {
      await expect(completions(foreign)).rejects.toThrow(/format 'f16-rows'; this backend reads only its own ownTensors\(\) forms/);
    } finally {
      await foreign.close();
    }
  });
});
