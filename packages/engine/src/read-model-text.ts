import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFileError } from './model-file-error.js';

/** config.json and shard indexes are kilobytes; anything far larger is not one (and is not read into memory). */
const MAX_MODEL_TEXT_BYTES = 64 * 2 ** 20;

/**
 * Reads a small text file of a model folder (config.json, a shard index). Only a regular file is opened — a FIFO or
 * device would block or never end — and only up to `MAX_MODEL_TEXT_BYTES`. `what` names the file's role in errors; `hint`
 * follows a failed read.
 */
export function readModelText(path: string, what: string, hint = ''): string {
  let size: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new ModelFileError(`${what} ${path} is not a regular file`);
    size = st.size;
  } catch (err) {
    if (err instanceof ModelFileError) throw err;
    throw new ModelFileError(`cannot read ${what} ${path}: ${(err as Error).message}${hint}`);
  }
  if (size > MAX_MODEL_TEXT_BYTES) throw new ModelFileError(`${what} ${path} is ${size} bytes, more than the ${MAX_MODEL_TEXT_BYTES} such a file can reasonably be; is it the right file?`);
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ModelFileError(`cannot read ${what} ${path}: ${(err as Error).message}${hint}`);
  }
}

/** `readModelText`, parsed as JSON; a file that is not JSON is a `ModelFileError` naming it (and the parser's reason). */
export function readModelJson(path: string, what: string, hint = ''): unknown {
  const text = readModelText(path, what, hint);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ModelFileError(`${what} ${path} is not valid JSON: ${(err as Error).message}`);
  }
}

/** `<dir>/config.json` of a model folder, parsed (see `readModelJson`). */
export function readConfigJson(dir: string): { json: unknown; path: string } {
  const path = join(dir, 'config.json');
  return { json: readModelJson(path, 'model config', ' (a model folder needs the Hugging Face config.json)'), path };
}
