import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { familyTokenizerFiles } from './family-tokenizer-files.js';
import { modelFolderWindowService, readModelFolderTokens } from './model-folder-window-service.js';
import { loadTokenizerFolder, writeFamilyTokenizerFolder } from './tokenizer-folder.js';

const root = mkdtempSync(join(tmpdir(), 'family-tokenizers-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const TEXTS = ['Hello world, the quick brown fox.', '  two leading spaces\n\nand\ttabs ', 'numbers 12345 and 3.14159', 'emoji 🦙🚀 and CJK 你好，世界', 'é (composed) and e\u0301 (decomposed)', ''];

/** Writes the family's tokenizer at its published vocabulary size and loads it back from the folder. */
function folder(style: 'llama3' | 'qwen2' | 'sentencepiece', vocabSize: number, chat = false) {
  const dir = join(root, `${style}-${vocabSize}-${chat}`);
  writeFamilyTokenizerFolder(dir, style, { vocabSize, chat, maxLength: 4096 });
  return { dir, tok: loadTokenizerFolder(dir, style) };
}

describe('Llama 3 byte-level BPE', () => {
  const { tok } = folder('llama3', 128256);
  it('has 128000 tokens and 256 special tokens, BOS from the post-processor template, exact decoding', () => {
    expect(tok.vocabSize).toBe(128256);
    expect([tok.bosTokenId, tok.eosTokenId, tok.tokenToId('<|eot_id|>'), tok.tokenToId('<|start_header_id|>')]).toEqual([128000, 128001, 128009, 128006]);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(text);
  });
  it("splits as Llama 3's pattern does: digits in threes, special tokens whole, bytes for emoji", () => {
    // GPT-2's merges (the vocabulary's source) know "Ġnumbers" but not "numbers" at the start of a text.
    expect(tok.tokenize('numbers 12345')).toEqual(['n', 'umbers', 'Ġ', '123', '45']);
    expect(tok.encode('<|eot_id|>Hi')).toEqual([128009, tok.tokenToId('Hi')]);
    expect(tok.tokenize('🦙')).toEqual(['ðŁ', '¦', 'Ļ']);
    expect(tok.encode('Hello world, the quick brown fox.').length).toBe(8);
  });
});

describe('Qwen2 byte-level BPE', () => {
  const { tok } = folder('qwen2', 151936, true);
  it('has 151643 tokens then endoftext, im_start, im_end; no BOS; EOS im_end for chat', () => {
    expect(tok.vocabSize).toBe(151646);
    expect([tok.bosTokenId, tok.eosTokenId, tok.padTokenId, tok.tokenToId('<|im_start|>')]).toEqual([undefined, 151645, 151643, 151644]);
    // config.json's ids as Qwen/Qwen2-0.5B publishes them: bos_token_id is <|endoftext|> though the tokenizer adds none.
    const files = familyTokenizerFiles('qwen2', { vocabSize: 151936 });
    expect([files.bosTokenId, files.eosTokenIds, files.config.bos_token, 'add_bos_token' in files.config]).toEqual([151643, [151643], null, false]);
    expect(tok.encode('<|im_start|>user\nHi<|im_end|>').slice(0, 1)).toEqual([151644]);
  });
  it('splits digits one by one, normalises to NFC, decodes the rest exactly', () => {
    expect(tok.tokenize('12345')).toEqual(['1', '2', '3', '4', '5']);
    expect(tok.decode(tok.encode('e\u0301'))).toBe('é');
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(text.normalize('NFC'));
  });
});

describe('Llama 2 / Mistral sentencepiece BPE with byte fallback', () => {
  const { tok } = folder('sentencepiece', 32000);
  it('puts <unk> <s> </s> and the 256 byte tokens first, adds BOS by add_bos_token, decodes exactly', () => {
    expect(tok.vocabSize).toBe(32000);
    expect([tok.tokenToId('<unk>'), tok.bosTokenId, tok.eosTokenId, tok.tokenToId('<0x00>'), tok.tokenToId('<0xFF>')]).toEqual([0, 1, 2, 3, 258]);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(text);
  });
  it('writes spaces as ▁ (one prepended) and falls back to UTF-8 bytes for what no piece covers', () => {
    expect(tok.tokenize('Hello world')).toEqual(['▁Hello', '▁world']);
    expect(tok.tokenize('🦙')).toEqual(['▁', '<0xF0>', '<0x9F>', '<0xA6>', '<0x99>']);
    expect(tok.tokenize('你')).toEqual(['▁', '<0xE4>', '<0xBD>', '<0xA0>']);
  });
});

describe('family tokenizers at small vocabularies and bad sizes', () => {
  it.each([['llama3', 1024], ['qwen2', 700], ['sentencepiece', 600]] as const)('%s with %i ids still round-trips every text', (style, size) => {
    const { tok } = folder(style, size);
    expect(tok.vocabSize).toBe(style === 'qwen2' ? 700 : size);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(style === 'qwen2' ? text.normalize('NFC') : text);
  });
  it('refuses a vocabulary too small for the bytes and special tokens, naming the fix', () => {
    expect(() => familyTokenizerFiles('llama3', { vocabSize: 300 })).toThrow('a llama3 tokenizer needs a vocabulary of at least 512 ids (bytes and special tokens), but vocab_size is 300; raise vocab_size');
    expect(() => familyTokenizerFiles('sentencepiece', { vocabSize: 259 })).toThrow(/at least 260 ids/);
  });
});

describe('the window and stop ids of a model folder', () => {
  it('reads max_position_embeddings, EOS list from generation_config.json, and the family tokens for the window', () => {
    const { dir, tok } = folder('llama3', 1024, true);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'llama', max_position_embeddings: 256, vocab_size: 1024, eos_token_id: 769 }));
    writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [769, 776, 777] }));
    expect(readModelFolderTokens(dir, tok)).toEqual({ maxPositions: 256, eosTokenIds: [769, 776, 777] });
    const ws = modelFolderWindowService(dir, tok);
    expect([ws.maxSequenceLength, ws.maxRequestLength, ws.endOfTextToken, ws.prefixToken]).toEqual([255, 256, '<|eot_id|>', '<|begin_of_text|>']);
  });
  it('falls back to config.json and refuses garbage with the file named', () => {
    const { dir, tok } = folder('sentencepiece', 600);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ max_position_embeddings: 64, vocab_size: 600, eos_token_id: 2 }));
    expect(readModelFolderTokens(dir, tok)).toEqual({ maxPositions: 64, eosTokenIds: [2] });
    expect(modelFolderWindowService(dir, tok).prefixToken).toBe('<s>');
    writeFileSync(join(dir, 'generation_config.json'), '{"eos_token_id": [2, 9999]}');
    expect(() => readModelFolderTokens(dir, tok)).toThrow(/generation_config\.json: eos_token_id holds 9999; each id must be an integer from 0 to 599/);
    writeFileSync(join(dir, 'generation_config.json'), '{"eos_');
    expect(() => readModelFolderTokens(dir, tok)).toThrow(/generation_config\.json is not valid JSON/);
    writeFileSync(join(dir, 'config.json'), '{"max_position_embeddings": "long"}');
    expect(() => readModelFolderTokens(dir, tok)).toThrow(/max_position_embeddings is "long"; it must be an integer of at least 2/);
  });
});
