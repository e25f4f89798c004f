export { OrtBackend, type OrtBackendOptions } from './ort-backend.js';
export { ORT_CHUNK_TOKENS, ortChunkRows } from './ort-protocol.js';
export { encodeModel, GraphBuilder, OnnxType, type OnnxModel, type OnnxNode, type OnnxTensor, type OnnxValueInfo } from './onnx-writer.js';
export { embeddingGraph, layerGraph, layerStageGraphs, headGraph, addFullModel } from './opt-graphs.js';
export * from './export-onnx.js';
export * from './measure-matmul.js';
export { addDecoderLayer, ORT_LAYER_KINDS, type DecoderLayerIo } from './ort-decoder-layer.js';
export { ropeCosSin } from './rope-cos-sin.js';
export {
  LLAMA_HEAD_INPUT,
  LLAMA_LAYER_IO,
  LLAMA_TABLE_INPUT,
  LLAMA_TENSOR_NAME,
  llamaEmbeddingGraph,
  llamaHeadGraph,
  llamaLayerGraph,
  llamaLayerStageGraphs,
  llamaStreamedHeadGraph,
  llamaStreamedLayerGraph,
  type LlamaHeadTensors,
  type LlamaLayerTensors,
} from './llama-graphs.js';
export { STREAMED_INPUT, streamedLayerGraph } from './streamed-layer-graph.js';
