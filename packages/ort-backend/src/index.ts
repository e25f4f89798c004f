export { OrtBackend, type OrtBackendOptions } from './ort-backend.js';
export { ORT_CHUNK_TOKENS, ortChunkRows } from './ort-protocol.js';
export { encodeModel, GraphBuilder, OnnxType, OPSET, type OnnxModel, type OnnxNode, type OnnxTensor, type OnnxValueInfo } from './onnx-writer.js';
export * from './export-onnx.js';
export * from './measure-matmul.js';
export { addDecoderLayer, fusedLayer, ORT_LAYER_KINDS, type DecoderLayerIo } from './ort-decoder-layer.js';
export { ropeCosSin } from './rope-cos-sin.js';
export {
  LLAMA_HEAD_INPUT,
  LLAMA_LAYER_IO,
  LLAMA_TABLE_INPUT,
  LLAMA_TENSOR_NAME,
  llamaEmbeddingGraph,
  llamaHeadGraph,
  llamaHeadInputs,
  llamaLayerGraph,
  llamaLayerStageGraphs,
  llamaStreamedHeadGraph,
  llamaStreamedLayerGraph,
  type LlamaHeadTensors,
  type LlamaLayerTensors,
  type LearnedPositionTables,
  POSITIONS_INPUT,
} from './llama-graphs.js';
export { addLlamaFullModel } from './llama-onnx-graph.js';
