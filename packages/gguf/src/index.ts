export * from './ggml-types.js';
export * from './read-gguf.js';
export * from './read-gguf-tensor.js';
export * from './dequantize.js';
export * from './quantize.js';
export { GgufMetadata } from './gguf-metadata.js';
export { ggufModel, GGUF_ARCHITECTURES, unpermuteRotary, type GgufModel } from './gguf-model.js';
export { ggufTokenizer, sentencepieceMerges, TOKEN_TYPE, type GgufTokenizerFiles } from './gguf-tokenizer.js';
export * from './import-gguf.js';
