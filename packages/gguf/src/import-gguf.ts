import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, realpathSync, rmSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { commitTree, writeFileAtomic } from '@flexhelm/atomic-write';
import { describeHfConfig, hfConfigJson, readModelDescription, ModelFileError, type ModelDescription } from '@flexhelm/engine';
import { ggufModel } from './gguf-model.js';
import { ggufTokenizer } from './gguf-tokenizer.js';
import { readGguf } from './read-gguf.js';

/** Whether `--model` names a GGUF file (by its extension). */
export function isGgufPath(path: string): boolean {
  return /\.gguf$/i.test(path);
}

/**
 * The one GGUF file a folder holds, or undefined when it holds none; several, or a split model
 * (`-00001-of-00003.gguf`), is an error saying which file to name.
 */
export function ggufInFolder(dir: string): string | undefined {
  const files = readdirSync(dir).filter(isGgufPath).sort();
  if (files.length === 0) return undefined;
  if (files.some((f) => /-\d{5}-of-\d{5}\.gguf$/i.test(f))) throw new ModelFileError(`${dir}: holds a split GGUF model (${files[0]}, …); merge it into one file first (llama-gguf-split --merge)`);
  if (files.length > 1) throw new ModelFileError(`${dir}: holds ${files.length} GGUF files (${files.join(', ')}); pass --model the one to run`);
  return join(dir, files[0]!);
}

/** A GGUF file's model description from its header alone (no conversion): what `profile` and planners need. */
export function describeGguf(path: string): ModelDescription {
  return describeHfConfig(ggufModel(readGguf(path)).config, `${path} (as config.json)`);
}

export interface ImportedGguf {
  /** The model folder (Hugging Face layout) the engine and tokenizer load. */
  folder: string;
  description: ModelDescription;
  /** The GGUF file (its real path): where the engine reads the weights (`GgufTensorSource`). */
  gguf: string;
  /** Whether this call wrote it (false: an earlier conversion of the same file was reused). */
  converted: boolean;
}

/** The file in an imported folder that names the GGUF file its weights are read from. */
export const GGUF_SOURCE_FILE = 'gguf-source.json';

/** What `GGUF_SOURCE_FILE` holds: the file (real path) and the size and modification time it was imported at. */
export interface GgufSourceRecord {
  gguf: string;
  size: number;
  mtimeMs: number;
}

/**
 * Makes the model folder of a GGUF file under `<dataDir>/models/`: config.json, generation_config.json,
 * tokenizer.json, tokenizer_config.json and `gguf-source.json` naming the file, written atomically, named after the
 * file and keyed by its path, size and modification time, so the same file is read once and a changed one again. The
 * weights stay in the GGUF file: the engine reads them from it (`GgufTensorSource`), so the folder is a few MB
 * whatever the model's size. (A folder an earlier version made with a widened model.safetensors copy loses the copy.)
 */
export function importGguf(path: string, dataDir: string, log?: (message: string) => void): ImportedGguf {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    throw new ModelFileError(`${path}: no such GGUF file`);
  }
  const st = statSync(real);
  const key = createHash('sha256').update(`${real}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 12);
  const stem = basename(real).replace(/\.gguf$/i, '').replace(/[^\w.-]+/g, '_');
  const models = join(dataDir, 'models');
  const folder = join(models, `gguf--${stem}-${key}`);
  if (existsSync(join(folder, 'config.json'))) {
    const description = readModelDescription(folder);
    const widened = join(folder, 'model.safetensors');
    if (existsSync(widened)) {
      // The source record first: at every moment the folder holds one or the other.
      writeFileAtomic(join(folder, GGUF_SOURCE_FILE), sourceRecord(real, st));
      log?.(`removing ${widened} (${(statSync(widened).size / 2 ** 30).toFixed(1)} GiB): weights are now read from ${real} itself`);
      rmSync(widened, { force: true });
    }
    return { folder, description, gguf: real, converted: false };
  }
  const file = readGguf(real);
  const model = ggufModel(file);
  const tokenizer = ggufTokenizer(file);
  // Checked before writing gigabytes: a setting the engine refuses names the GGUF file.
  const description = describeHfConfig(model.config, `${path} (as config.json)`);
  log?.(`reading ${path} (${model.architecture}, ${file.tensors.length} tensors): its config and tokenizer to ${folder}; the weights are read from the file`);
  const tmp = `${folder}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    writeFileAtomic(join(tmp, 'config.json'), hfConfigJson(model.config));
    const generation: Record<string, unknown> = { _from_model_config: true };
    for (const k of ['bos_token_id', 'eos_token_id', 'pad_token_id']) if (model.config[k] !== undefined) generation[k] = model.config[k];
    writeFileAtomic(join(tmp, 'generation_config.json'), hfConfigJson(generation));
    writeFileAtomic(join(tmp, 'tokenizer.json'), JSON.stringify(tokenizer.tokenizerJson));
    writeFileAtomic(join(tmp, 'tokenizer_config.json'), `${JSON.stringify(tokenizer.config, null, 2)}\n`);
    writeFileAtomic(join(tmp, GGUF_SOURCE_FILE), sourceRecord(real, st));
    commitTree(tmp, folder);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return { folder, description, gguf: real, converted: true };
}

function sourceRecord(real: string, st: { size: number; mtimeMs: number }): string {
  const record: GgufSourceRecord = { gguf: real, size: st.size, mtimeMs: st.mtimeMs };
  return `${JSON.stringify(record, null, 2)}\n`;
}

