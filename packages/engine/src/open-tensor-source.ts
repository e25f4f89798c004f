import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFileError } from './model-file-error.js';
import { NpyFolderSource } from './npy-folder.js';
import { SafetensorsSource } from './safetensors.js';
import type { TensorSource } from './tensor-source.js';

/**
 * Finds the weights in a model folder: `model.safetensors.index.json` (sharded), `model.safetensors`, or a
 * FlexLLMGen numpy folder (the folder itself, or `<dir>/<name>-np`).
 */
export function openTensorSource(path: string, modelName?: string): TensorSource {
  if (!existsSync(path)) throw new ModelFileError(`model path ${path} does not exist`);
  if (statSync(path).isFile()) return new SafetensorsSource(path);
  const index = join(path, 'model.safetensors.index.json');
  if (existsSync(index)) return new SafetensorsSource(index);
  const single = join(path, 'model.safetensors');
  if (existsSync(single)) return new SafetensorsSource(single);
  if (existsSync(join(path, 'decoder.embed_tokens.weight')) || existsSync(join(path, 'decoder.embed_tokens.weight.npy'))) return new NpyFolderSource(path);
  if (modelName && existsSync(join(path, `${modelName}-np`))) return new NpyFolderSource(join(path, `${modelName}-np`));
  throw new ModelFileError(`no weights found in ${path}: expected model.safetensors, model.safetensors.index.json, or FlexLLMGen .npy files (decoder.embed_tokens.weight, …)`);
}
