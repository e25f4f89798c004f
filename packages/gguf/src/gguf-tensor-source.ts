import { decodeTensor, ModelFileError, type TensorInfo, type TensorSource, type TensorToWrite } from '@flexhelm/engine';
import { ggufModel } from './gguf-model.js';
import { readGguf } from './read-gguf.js';

/**
 * A GGUF file as the engine's checkpoint, read in place: its tensors under their Hugging Face names (`ggufModel`),
 * each read from the file when the engine asks for it. Stored F32 / F16 / BF16 values are decoded and checked for
 * NaN / ±Inf as a safetensors read is; quantized ones are dequantized as ggml does (llama's q/k rows put back in
 * Hugging Face's order). Nothing is converted ahead or written anywhere, and a backend that multiplies the blocks
 * (`ownLayerWeights`) leaves their widened copies unread.
 */
export class GgufTensorSource implements TensorSource {
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  private readonly data: ReadonlyMap<string, TensorToWrite['data']>;

  constructor(readonly path: string) {
    const model = ggufModel(readGguf(path));
    this.tensors = new Map(model.tensors.map((t) => [t.name, { name: t.name, dtype: t.dtype, shape: t.shape, file: path }]));
    this.data = new Map(model.tensors.map((t) => [t.name, t.data]));
  }

  read(name: string): Float32Array {
    const info = this.tensors.get(name);
    const data = this.data.get(name);
    if (!info || !data) throw new ModelFileError(`${this.path}: no tensor ${name} (as the model names it)`);
    const values = typeof data === 'function' ? data() : data;
    return decodeTensor(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), info.dtype, info);
  }

  close(): void {}
}
