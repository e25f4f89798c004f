// The model shapes bench:engine measures: OPT sizes (`opt-125m`, …) and the Llama-family bases of make-model
// (`llama-3.2-1b`, `qwen2-0.5b`, `llama-3.1-8b`, …). Each gives its family, vocabulary, the layer GEMMs of the MatMul
// roofline and its prefill FLOPs; a Llama-family shape is written as a Hub folder (random bf16 weights) that our
// engine loads and the peer's ONNX copy is exported from.
import { descriptionByName, knownHubBases, makeHubModel } from '../dist/index.js';
import { exportOnnx } from '../../ort-backend/dist/index.js';

/** A built-in shape by name; an unknown name is an error listing the known ones. */
export function benchShape(name) {
  if (name.startsWith('opt-') || name.startsWith('opt-iml')) {
    const d = descriptionByName(name);
    const E = d.hiddenSize;
    const F = d.mlp.intermediateSize;
    return { name, family: 'opt', description: d, vocabSize: d.vocabSize, gemms: [{ k: E, n: 3 * E }, { k: E, n: E }, { k: E, n: F }, { k: F, n: E }] };
  }
  if (!knownHubBases().includes(name)) throw new Error(`--model ${name}: not a built-in shape; one of ${knownHubBases().join(', ')}`);
  const d = descriptionByName(name);
  const E = d.hiddenSize;
  const { heads: H, kvHeads: KV, headDim: hd } = d.attention;
  const I = d.mlp.intermediateSize;
  return {
    name,
    family: d.family,
    description: d,
    vocabSize: d.vocabSize,
    // q, k and v together, the output projection, gate and up together, down.
    gemms: [{ k: E, n: (H + 2 * KV) * hd }, { k: H * hd, n: E }, { k: E, n: 2 * I }, { k: I, n: E }],
    writeFolder: (dir) => makeHubModel({ config: name, outDir: dir, seed: 1, dtype: 'bf16' }),
    exportPeer: (modelDir, outDir) => exportOnnx(modelDir, outDir),
  };
}

/**
 * FLOPs of a prefill of `batch` prompts of length L, counting multiply-adds as 2: the linear layers, the attention
 * products q·kᵀ and p·v over the causal half only (key j ≤ query i: the work a causal model needs, although the
 * kernel computes the masked half too), and the output head at the last position. Norms, softmax, rotary embeddings,
 * the SiLU gate, bias and residual adds are not counted.
 */
export function shapeFlops(shape, batch, L) {
  const causal = (L * (L + 1)) / 2;
  if (shape.family === 'opt') {
    const d = shape.description;
    const E = d.hiddenSize;
    const linear = 2 * d.layers * (4 * E * E + 2 * E * d.mlp.intermediateSize) * L;
    const attention = d.layers * 4 * E * causal;
    return batch * (linear + attention + 2 * d.vocabSize * d.embedding.dim);
  }
  const d = shape.description;
  const perToken = shape.gemms.reduce((a, g) => a + 2 * g.k * g.n, 0);
  const attention = 4 * d.attention.heads * d.attention.headDim * causal;
  return batch * (d.layers * (perToken * L + attention) + 2 * d.vocabSize * d.hiddenSize);
}
