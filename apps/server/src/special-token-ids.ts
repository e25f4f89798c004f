import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const CONFIG_TOKENS = ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token'];

function readJson(path: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The ids of a model folder's special tokens, those `skip_special_tokens` leaves out of generated text (as transformers'
 * `decode(skip_special_tokens=True)`): `tokenizer.json`'s added tokens marked `special`, else (a `vocab.json` +
 * `merges.txt` folder) the tokens tokenizer_config.json and special_tokens_map.json name (bos, eos, unk, pad…).
 */
export function specialTokenIds(folder: string): Set<number> {
  const ids = new Set<number>();
  const json = readJson(join(folder, 'tokenizer.json'));
  if (json) {
    for (const t of (json.added_tokens ?? []) as { id?: unknown; special?: unknown }[]) if (t.special === true && typeof t.id === 'number') ids.add(t.id);
    return ids;
  }
  const vocab = existsSync(join(folder, 'vocab.json')) ? readJson(join(folder, 'vocab.json')) : undefined;
  if (!vocab) return ids;
  for (const file of ['tokenizer_config.json', 'special_tokens_map.json']) {
    const config = readJson(join(folder, file)) ?? {};
    for (const key of CONFIG_TOKENS) {
      const v = config[key];
      const content = typeof v === 'string' ? v : typeof (v as { content?: unknown } | null)?.content === 'string' ? (v as { content: string }).content : undefined;
      const id = content === undefined ? undefined : vocab[content];
      if (typeof id === 'number') ids.add(id);
    }
  }
  return ids;
}
