import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadTokenizerFolder, writeFamilyTokenizerFolder, writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import { charsPerToken } from './chars-per-token.js';

const folder = () => mkdtempSync(join(tmpdir(), 'flexhelm-cpt-'));

describe('charsPerToken', () => {
  it('bounds the characters per token of real tokenizers: no text has fewer tokens than its length over the bound', () => {
    const texts = ['hello world '.repeat(300), 'ÿ'.repeat(500), '😀 é\u0301 ᾂ ﬁ\n\t  x'.repeat(100), '='.repeat(4000), ' '.repeat(3000), '<|begin_of_text|>'.repeat(50)];
    const opt = folder();
    writeOptShapedTokenizerFolder(opt);
    const dirs = [opt];
    for (const style of ['llama3', 'sentencepiece', 'qwen'] as const) {
      const d = folder();
      writeFamilyTokenizerFolder(d, style, { vocabSize: 1024 });
      dirs.push(d);
    }
    for (const d of dirs) {
      const bound = charsPerToken(d);
      expect(bound, d).toBeGreaterThan(1);
      const tokenizer = loadTokenizerFolder(d, 'x');
      for (const t of texts) expect(tokenizer.encode(t).length, `${d}: ${t.slice(0, 20)}`).toBeGreaterThanOrEqual(Math.ceil(t.length / bound!));
    }
  });

  it('gives no bound where one token can stand for any number of characters', () => {
    const d = folder();
    const vocab = { a: 0, '[UNK]': 1 };
    const write = (extra: object) => writeFileSync(join(d, 'tokenizer.json'), JSON.stringify({ model: { type: 'BPE', vocab, merges: [] }, ...extra }));
    write({ normalizer: { type: 'Strip', strip_left: true, strip_right: true } });
    expect(charsPerToken(d)).toBeUndefined();
    write({ pre_tokenizer: { type: 'Whitespace' } });
    expect(charsPerToken(d)).toBeUndefined();
    writeFileSync(join(d, 'tokenizer.json'), JSON.stringify({ model: { type: 'BPE', vocab, merges: [], unk_token: '[UNK]', fuse_unk: true } }));
    expect(charsPerToken(d)).toBeUndefined();
    writeFileSync(join(d, 'tokenizer.json'), JSON.stringify({ model: { type: 'WordPiece', vocab } }));
    expect(charsPerToken(d)).toBeUndefined();
    write({ normalizer: { type: 'NFC' } });
    expect(charsPerToken(d)).toBe(5 * 4); // '[UNK]' is 5 characters; composition joins up to 4
  });
});
