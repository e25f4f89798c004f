import { layerObjects, numel, type ModelShape } from '@flexhelm/offload/plan';

/** Bytes a weight takes in the 16-bit layers the decode probe times (`flexhelm profile`: bf16 on oneDNN, f16 streamed). */
const PROBED_BYTES = 2;

/**
 * A decode step reads every weight once, so its time follows the bytes read. With matrices held as blocks
 * (`ModelShape.family.held`: a GGUF file's on oneDNN), a layer and the head read the blocks' bytes instead of the
 * 16-bit weights the probe timed: the share of the probe's decode time each takes (1 without blocks). Prompt steps
 * are arithmetic (the blocks are widened in cache for the tile GEMM), so they keep the probe's time.
 */
export function heldDecodeShare(shape: ModelShape): { layer: number; head: number } {
  const held = shape.family?.held;
  if (!held) return { layer: 1, head: 1 };
  let probed = 0;
  let read = 0;
  // Layer 0 stands for every layer, as in `layerPlacement`.
  for (const obj of layerObjects({ ...shape, numLayers: 1 })) {
    if (!obj.name.startsWith('attention_') && !obj.name.startsWith('mlp_')) continue;
    for (const t of obj.tensors) {
      const bytes = PROBED_BYTES * numel(t.shape);
      probed += bytes;
      read += held[t.name] ?? bytes;
    }
  }
  const head = held['lm_head.weight'];
  const headProbed = PROBED_BYTES * shape.vocabSize * (shape.wordEmbedProjDim ?? shape.hiddenSize);
  return { layer: probed > 0 ? read / probed : 1, head: head !== undefined ? head / headProbed : 1 };
}
