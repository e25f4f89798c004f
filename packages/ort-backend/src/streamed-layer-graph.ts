import { layerTensorShapes, untransposeLayerWeights, type LayerTensorKey, type LayerWeights, type OptConfig } from '@flexhelm/engine';
import { encodeModel, GraphBuilder, OnnxType } from './onnx-writer.js';
import { addLayer, LAYER_IO, layerStageIo, OPSET } from './opt-graphs.js';

/** Graph input names of the streamed layer graph, by tensor. */
export const STREAMED_INPUT: Record<LayerTensorKey, string> = {
  qW: 'q_w', qB: 'q_b', kW: 'k_w', kB: 'k_b', vW: 'v_w', vB: 'v_b', oW: 'out_w', oB: 'out_b',
  ln1W: 'ln1_w', ln1B: 'ln1_b', fc1W: 'fc1_w', fc1B: 'fc1_b', fc2W: 'fc2_w', fc2B: 'fc2_b', ln2W: 'ln2_w', ln2B: 'ln2_b',
};

/**
 * The decoder layer of `layerGraph` with every weight a graph input (in `TransposedLayerWeights` layout) instead of an
 * initializer, so one session serves every layer whose weights are streamed in. q/k/v are concatenated in the graph
 * into the fused `[E, 3E]` matrix the resident layer graph uses, so both compute the same Gemm.
 */
export function streamedLayerGraph(c: OptConfig): Uint8Array {
  const g = new GraphBuilder();
  // addLayer wants weights to build initializers from; tiny placeholders of the right length, dropped below.
  const placeholder = {} as LayerWeights;
  for (const { key, shape } of layerTensorShapes(c)) placeholder[key] = new Float32Array(shape.reduce((a, b) => a * b, 1));
  g.op('Concat', [STREAMED_INPUT.qW, STREAMED_INPUT.kW, STREAMED_INPUT.vW], { axis: 1 }, 'qkv_w');
  g.op('Concat', [STREAMED_INPUT.qB, STREAMED_INPUT.kB, STREAMED_INPUT.vB], { axis: 0 }, 'qkv_b');
  addLayer(g, c, untransposeLayerWeights(c, placeholder), '', LAYER_IO, 'fused');
  const weightNames = new Set(['qkv_w', 'qkv_b', ...Object.values(STREAMED_INPUT)]);
  const initializers = g.initializers.filter((t) => !weightNames.has(t.name));
  const shapes = new Map(layerTensorShapes(c).map((s) => [STREAMED_INPUT[s.key], s.shape]));
  const io = layerStageIo(c);
  return encodeModel({
    graphName: 'opt_layer_streamed',
    nodes: g.nodes,
    initializers,
    inputs: [...io.inputs, ...[...shapes].map(([name, dims]) => ({ name, type: OnnxType.FLOAT, dims }))],
    outputs: io.outputs,
    opset: OPSET,
    microsoft: true,
  });
}
