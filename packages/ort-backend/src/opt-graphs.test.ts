import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { layerGraph, layerStageGraphs, layerStageGraphsInOut } from './opt-graphs.js';
import { optConfigByName, OptWeights, DummyTensorSource, transposeLayerWeights } from '@flexhelm/engine';

const c = { ...optConfigByName('opt-125m'), hiddenSize: 96, numAttentionHeads: 4, ffnDim: 200, numHiddenLayers: 1, vocabSize: 300, wordEmbedProjDim: 96, maxPositionEmbeddings: 64 };
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex').slice(0, 16);

describe('layer graphs', () => {
  it('builds the same bytes from [in, out] weights as from the checkpoint layout, and the same as before', () => {
    const w = new OptWeights(c, new DummyTensorSource(c, 3)).layer(0);
    const fromCheckpoint = layerStageGraphs(c, w);
    const fromInOut = layerStageGraphsInOut(c, transposeLayerWeights(c, w));
    expect(Buffer.from(fromInOut.qkv).equals(Buffer.from(fromCheckpoint.qkv))).toBe(true);
    expect(Buffer.from(fromInOut.rest).equals(Buffer.from(fromCheckpoint.rest))).toBe(true);
    // The digests of these graphs when the weights were transposed inside the graph builders: unchanged bytes mean
    // onnxruntime computes exactly what it did.
    expect([sha(fromInOut.qkv), sha(fromInOut.rest), sha(layerGraph(c, w))]).toEqual(['1f05adc7dba93895', 'a68e2273c64f3516', '8a291898da8da2ca']);
  });
});
