export * from './model-file-error.js';
export * from './opt-config.js';
export * from './tensor-source.js';
export * from './safetensors.js';
export * from './npy-folder.js';
export * from './opt-weights.js';
export * from './random-weights.js';
export * from '@flexhelm/contract';
export * from './streamed-layer.js';
export * from './opt-reference.js';
export { ReferenceBackend } from './reference-backend.js';
export { OrtBackend, type OrtBackendOptions } from './ort-backend.js';
export { ORT_CHUNK_TOKENS, ortChunkRows } from './ort-protocol.js';
export { encodeModel, GraphBuilder, OnnxType, type OnnxModel, type OnnxNode, type OnnxTensor, type OnnxValueInfo } from './onnx-writer.js';
export { embeddingGraph, layerGraph, layerStageGraphs, headGraph, transposed, addFullModel } from './opt-graphs.js';
export * from './export-onnx.js';
export * from './engine.js';
export * from './generate.js';
export * from './memory-budget.js';
export * from './make-model.js';
export * from './make-hub-model.js';
export * from './hf-config-json.js';
export type { FamilyBase, FamilyTokenizerStyle } from './families/family-entry.js';
export { argmax, logSumExp, topK, sampleToken, processedLogits, type SamplingSettings } from './sampling.js';
export * from './measure-matmul.js';
export { BufferPool, bucketCapacity } from './buffer-pool.js';
export * from './opt-description.js';
export { StagedKvCache } from './staged-kv-cache.js';
export * from './llama-description.js';
export { FAMILY_BASES, FAMILY_REGISTRY, familyEntry, familyOfBase, familyOfConfig, makeConfigFromHf, readFolderModel, type FamilyEntry } from './families/registry.js';
export { ropeInvFreq } from './rope-inv-freq.js';
export { moeMlp, routeTokens, type TokenRoutes } from './moe-reference.js';
export { parameterCounts, type ParameterCounts } from './parameter-counts.js';
export { rmsNorm, applyRope, decoderLayer, layerHasWindow, llamaEmbed, llamaLayer, llamaHead, stepInvFreq } from './llama-reference.js';
export { LlamaCheckpoint } from './llama-checkpoint.js';
export { checkpointLayerShapes, splitCheckpointLayer, transposeLayerTensors, untransposeLayerTensors } from './layer-tensors.js';
export { addDecoderLayer, ORT_LAYER_KINDS, type DecoderLayerIo } from './ort-decoder-layer.js';
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
export { ropeCosSin } from './rope-cos-sin.js';
