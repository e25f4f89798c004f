import type { Tokenizer } from '@flexhelm/core';

/** GPT-2's byte-level alphabet (`bytes_to_unicode`) read backwards: the character a token string uses → its byte. */
function byteLevelDecoder(): Map<string, number> {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const map = new Map<string, number>();
  for (const b of printable) map.set(String.fromCharCode(b), b);
  let shifted = 0;
  for (let b = 0; b < 256; b++) if (!printable.includes(b)) map.set(String.fromCharCode(256 + shifted++), b);
  return map;
}

const BYTE_OF = byteLevelDecoder();
const fatal = new TextDecoder('utf-8', { fatal: true });

/** A tokenizer that can name a token (Hugging Face's): its byte-level string gives the token's exact bytes. */
interface NamingTokenizer extends Tokenizer {
  idToToken(id: number): string | undefined;
}

const names = (t: Tokenizer): t is NamingTokenizer => typeof (t as Partial<NamingTokenizer>).idToToken === 'function';

/** Characters (code points, as OpenAI's Python server counts them) in `text`. */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * Token texts as OpenAI reports them for byte-level BPE: a token whose bytes are not whole UTF-8 characters (a piece of
 * `é` or `😀`) is spelled `bytes:\xNN…`, and text offsets count the characters of the decoded prefix, so a character
 * split over several tokens is counted once, at the token that completes it.
 */
export class TokenText {
  private readonly bytesCache = new Map<number, Uint8Array>();
  private readonly labelCache = new Map<number, string>();

  constructor(private readonly tokenizer: Tokenizer) {}

  /** The bytes token `id` adds to the text (empty for ids the tokenizer does not know). */
  bytes(id: number): Uint8Array {
    let b = this.bytesCache.get(id);
    if (b) return b;
    const name = names(this.tokenizer) ? this.tokenizer.idToToken(id) : undefined;
    if (name !== undefined && [...name].every((ch) => BYTE_OF.has(ch))) b = Uint8Array.from([...name], (ch) => BYTE_OF.get(ch)!);
    else b = Buffer.from(this.tokenizer.decode([id]), 'utf8'); // special tokens and tokenizers without byte-level names
    this.bytesCache.set(id, b);
    return b;
  }

  /** OpenAI's token string: the text when the token holds whole characters, else `bytes:\xe6\x97`. */
  label(id: number): string {
    let s = this.labelCache.get(id);
    if (s !== undefined) return s;
    const b = this.bytes(id);
    try {
      s = fatal.decode(b);
    } catch {
      s = `bytes:${Array.from(b, (x) => `\\x${x.toString(16).padStart(2, '0')}`).join('')}`;
    }
    this.labelCache.set(id, s);
    return s;
  }

  /**
   * Start offset of each token in characters, from `start`: the characters of everything decoded before it. Bytes of
   * an unfinished character count once the character completes. `skip[i]` tokens add nothing (an added `</s>`).
   */
  offsets(ids: readonly number[], start = 0, skip: (i: number) => boolean = () => false): { offsets: number[]; end: number } {
    const decoder = new TextDecoder('utf-8');
    const offsets: number[] = [];
    let at = start;
    ids.forEach((id, i) => {
      offsets.push(at);
      if (!skip(i)) at += codePoints(decoder.decode(this.bytes(id), { stream: true }));
    });
    return { offsets, end: at };
  }
}
