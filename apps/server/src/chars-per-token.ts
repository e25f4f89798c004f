import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// Normalizers that never shrink text (or shrink it by a known factor: canonical composition joins at most 4 code
// points, e.g. α + ̓ + ̀ + ͅ → ᾂ), and pre-tokenizers that never drop characters. Anything else (Strip, a Replace
// that deletes, a Split that removes, WordPiece's fused unknown words) could map unboundedly many characters to one
// token, so no bound is given and prompts are tokenized to be measured.
const SHRINK: Record<string, number> = { Prepend: 1, Lowercase: 1, NFD: 1, NFKD: 1, NFC: 4, NFKC: 4 };
const KEEPS_CHARS = new Set(['ByteLevel', 'Metaspace', 'Digits', 'Punctuation']);

type Json = Record<string, unknown> | null | undefined;

/** How many times shorter the normalizer can make a text, or undefined when it can drop characters. */
function shrinkOf(n: Json): number | undefined {
  if (!n) return 1;
  if (n.type === 'Sequence' && Array.isArray(n.normalizers)) {
    let total = 1;
    for (const inner of n.normalizers as Json[]) {
      const f = shrinkOf(inner);
      if (f === undefined) return undefined;
      total *= f;
    }
    return total;
  }
  if (n.type === 'Replace') {
    const pattern = (n.pattern as { String?: unknown } | undefined)?.String;
    // A literal replaced by something at least as long (Llama's ' ' → '▁') never shrinks the text.
    return typeof pattern === 'string' && typeof n.content === 'string' && n.content.length >= pattern.length ? 1 : undefined;
  }
  return SHRINK[String(n.type)];
}

function keepsChars(p: Json): boolean {
  if (!p) return true;
  if (p.type === 'Sequence' && Array.isArray(p.pretokenizers)) return (p.pretokenizers as Json[]).every(keepsChars);
  if (p.type === 'Split') return p.behavior !== 'Removed';
  return KEEPS_CHARS.has(String(p.type));
}

function longest(strings: Iterable<string>): number {
  let max = 0;
  for (const s of strings) max = Math.max(max, s.length);
  return max;
}

/**
 * An upper bound on the characters (UTF-16 units) of prompt text one token of this model folder's tokenizer can
 * stand for, or undefined when the tokenizer gives none. A prompt of `c` characters is then at least
 * `ceil(c / bound)` tokens, so a prompt that surely cannot fit the window is refused without being tokenized.
 *
 * Sound for BPE: every token is a vocabulary entry or an added token, and covers at most as many characters of the
 * normalized text as its string has (byte-level strings have one character per byte, and a UTF-8 byte count is never
 * below the UTF-16 length of the same text). Unknown characters are one token each unless `fuse_unk` joins them
 * (without `byte_fallback`), which gives no bound; so does a normalizer or pre-tokenizer that can drop characters.
 */
export function charsPerToken(folder: string): number | undefined {
  const jsonPath = join(folder, 'tokenizer.json');
  try {
    if (!existsSync(jsonPath)) {
      // vocab.json + merges.txt: GPT-2's byte-level BPE (what loadTokenizerFolder converts them to).
      const vocab = JSON.parse(readFileSync(join(folder, 'vocab.json'), 'utf8')) as Record<string, unknown>;
      return Math.max(1, longest(Object.keys(vocab)));
    }
    const json = JSON.parse(readFileSync(jsonPath, 'utf8')) as { model?: Json; normalizer?: Json; pre_tokenizer?: Json; added_tokens?: { content?: unknown }[] };
    const model = json.model;
    if (!model || model.type !== undefined && model.type !== 'BPE') return undefined;
    if (model.fuse_unk === true && model.byte_fallback !== true && model.unk_token != null) return undefined;
    const shrink = shrinkOf(json.normalizer);
    if (shrink === undefined || !keepsChars(json.pre_tokenizer)) return undefined;
    const vocab = model.vocab;
    if (!vocab || typeof vocab !== 'object' || Array.isArray(vocab)) return undefined;
    const added = (json.added_tokens ?? []).map((t) => (typeof t.content === 'string' ? t.content : ''));
    return Math.max(1, longest(Object.keys(vocab)), longest(added)) * shrink;
  } catch {
    return undefined; // the tokenizer loaded already; a file this cannot read only means no cheap bound
  }
}
