import { existsSync, readFileSync, statSync } from 'node:fs';
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
  // A GGUF file's folder (@flexhelm/gguf's importGguf): its weights stay in the file, read by that package's source.
  const gguf = ggufOf(path);
  if (gguf !== undefined) throw new ModelFileError(`${path} holds no weights: they are read from the GGUF file ${gguf}; pass that file as the model (--model ${gguf}), or load it with @flexhelm/gguf's GgufTensorSource`);
  throw new ModelFileError(`no weights found in ${path}: expected model.safetensors, model.safetensors.index.json, or FlexLLMGen .npy files (decoder.embed_tokens.weight, …)`);
}

/** The GGUF file an imported folder's `gguf-source.json` names, if it has one. */
function ggufOf(dir: string): string | undefined {
  const record = join(dir, 'gguf-source.json');
  if (!existsSync(record)) return undefined;
  try {
    const gguf = (JSON.parse(readFileSync(record, 'utf8')) as { gguf?: unknown }).gguf;
    return typeof gguf === 'string' ? gguf : record;
  } catch {
    return record;
  }
}
