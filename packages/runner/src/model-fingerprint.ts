import { createHash } from 'node:crypto';
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A model's identity for the request cache: its config.json and, for every weight file, name, size and a hash of its
 * first and last MiB (safetensors headers hold every tensor's name, dtype, shape and offsets). Different weights,
 * a different config or a re-quantised file give a different id; hashing whole 60 GB checkpoints is avoided.
 */
export function modelFingerprint(folder: string, extra: Record<string, unknown> = {}): string {
  const hash = createHash('sha256');
  const files = readdirSync(folder).filter((f) => /\.(json|safetensors|npy)$/.test(f) || !f.includes('.')).sort();
  for (const f of files) {
    if (f === '.complete' || /^tokenizer|vocab\.json|merges\.txt|special_tokens_map\.json/.test(f)) continue;
    const path = join(folder, f);
    const st = statSync(path);
    if (!st.isFile()) continue;
    hash.update(`${f}\0${st.size}\0`);
    if (f.endsWith('.json')) {
      hash.update(readFileSync(path));
      continue;
    }
    const fd = openSync(path, 'r');
    try {
      const chunk = Buffer.alloc(Math.min(st.size, 1 << 20));
      readSync(fd, chunk, 0, chunk.length, 0);
      hash.update(chunk);
      if (st.size > chunk.length) {
        readSync(fd, chunk, 0, chunk.length, st.size - chunk.length);
        hash.update(chunk);
      }
    } finally {
      closeSync(fd);
    }
  }
  hash.update(JSON.stringify(extra));
  return hash.digest('hex').slice(0, 32);
}
