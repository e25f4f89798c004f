import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { familyTokenizerFiles, type TokenizerStyle } from './family-tokenizer-files.js';
import { modelFolderWindowService, readModelFolderTokens } from './model-folder-window-service.js';
import { loadTokenizerFolder, writeFamilyTokenizerFolder } from './tokenizer-folder.js';

const root = mkdtempSync(join(tmpdir(), 'family-tokenizers-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const TEXTS = ['Hello world, the quick brown fox.', '  two leading spaces\n\nand\ttabs ', 'numbers 12345 and 3.14159', 'emoji 🦙🚀 and CJK 你好，世界', 'é (composed) and e\u0301 (decomposed)', ''];

/** Writes the family's tokenizer at its published vocabulary size and loads it back from the folder. */
function folder(style: TokenizerStyle, vocabSize: number, chat = false) {
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
  const { tok } = folder('qwen', 151936, true);
  it('has 151643 tokens then endoftext, im_start, im_end; no BOS; EOS im_end for chat', () => {
    expect(tok.vocabSize).toBe(151646);
    expect([tok.bosTokenId, tok.eosTokenId, tok.padTokenId, tok.tokenToId('<|im_start|>')]).toEqual([undefined, 151645, 151643, 151644]);
    // config.json's ids as Qwen/Qwen2-0.5B publishes them: bos_token_id is <|endoftext|> though the tokenizer adds none.
    const files = familyTokenizerFiles('qwen', { vocabSize: 151936 });
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

describe('Gemma sentencepiece BPE (no prefix space, split digits)', () => {
  const { tok } = folder('gemma', 256000, true);
  it('puts the specials at the published ids, BOS <bos> by add_bos_token, EOS <eos>, pad <pad>; decodes exactly', () => {
    expect(tok.vocabSize).toBe(256000);
    expect([tok.tokenToId('<pad>'), tok.eosTokenId, tok.bosTokenId, tok.tokenToId('<unk>'), tok.padTokenId]).toEqual([0, 1, 2, 3, 0]);
    expect([tok.tokenToId('<start_of_turn>'), tok.tokenToId('<end_of_turn>'), tok.tokenToId('<0x00>'), tok.tokenToId('<0xFF>')]).toEqual([106, 107, 108, 363]);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(text);
  });
  it('prepends no ▁ (a leading space is its own), splits every digit, keeps turn markers whole', () => {
    expect(tok.tokenize('Hello world')).toEqual(['Hello', '▁world']);
    expect(tok.tokenize(' Hello')).toEqual(['▁Hello']);
    expect(tok.tokenize('numbers 12345')).toEqual(['n', 'umbers', '▁', '1', '2', '3', '4', '5']);
    expect(tok.tokenize('🦙')).toEqual(['<0xF0>', '<0x9F>', '<0xA6>', '<0x99>']);
    const ids = tok.encode('<start_of_turn>user\nHi<end_of_turn>');
    expect([ids[0], ids[2], ids[4], ids.length]).toEqual([106, tok.tokenToId('<0x0A>'), 107, 5]);
  });
  it('writes the instruct conventions: <eos> and <end_of_turn> stop, the Gemma template', () => {
    const files = familyTokenizerFiles('gemma', { vocabSize: 256000, chat: true });
    expect([files.bosTokenId, files.eosTokenIds, files.padTokenId]).toEqual([2, [1, 107], 0]);
    expect(files.config.chat_template).toContain("'<start_of_turn>' + role");
    expect(familyTokenizerFiles('gemma', { vocabSize: 256000 }).eosTokenIds).toEqual([1]);
  });
});

describe('Phi-3 sentencepiece BPE with its chat tokens', () => {
  const { tok } = folder('phi3-mini', 32064, true);
  it("has Llama 2's 32000 ids then <|endoftext|> 32000 … <|end|> 32007 … <|user|> 32010; adds no BOS", () => {
    expect(tok.vocabSize).toBe(32011);
    expect([tok.bosTokenId, tok.eosTokenId, tok.padTokenId, tok.tokenToId('<s>')]).toEqual([undefined, 32000, 32000, 1]);
    expect(['<|assistant|>', '<|system|>', '<|end|>', '<|user|>'].map((t) => tok.tokenToId(t))).toEqual([32001, 32006, 32007, 32010]);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(text);
  });
  it('prepends ▁ to each text segment and lets the role tokens eat the whitespace after them (rstrip)', () => {
    expect(tok.tokenize('Hello world')).toEqual(['▁Hello', '▁world']);
    expect(tok.tokenize('🦙')).toEqual(['▁', '<0xF0>', '<0x9F>', '<0xA6>', '<0x99>']);
    const ids = tok.encode('<|user|>\nHi<|end|>\n<|assistant|>');
    expect(ids).toEqual([32010, tok.tokenToId('▁Hi'), 32007, 32001]);
    expect(tok.encode('<|endoftext|>Hi')).toEqual([32000, tok.tokenToId('▁Hi')]);
  });
  it("lists Phi-3 Instruct's stop ids and config.json's BOS 1", () => {
    const files = familyTokenizerFiles('phi3-mini', { vocabSize: 32064, chat: true });
    expect([files.bosTokenId, files.eosTokenIds, files.padTokenId, files.config.add_bos_token]).toEqual([1, [32007, 32001, 32000], 32000, false]);
  });
});

describe('OLMo 2 byte-level BPE with the cl100k split', () => {
  const { tok } = folder('dolma2', 100352, true);
  it('has 100256 regular ids then <|endoftext|> 100257 … <|pad|> 100277; no BOS', () => {
    expect(tok.vocabSize).toBe(100278);
    expect([tok.bosTokenId, tok.eosTokenId, tok.padTokenId, tok.tokenToId('<|endofprompt|>')]).toEqual([undefined, 100257, 100277, 100276]);
    const files = familyTokenizerFiles('dolma2', { vocabSize: 100352 });
    expect([files.bosTokenId, files.eosTokenIds, files.padTokenId]).toEqual([undefined, [100257], 100277]);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(text);
  });
  it("splits as cl100k does (digits in threes, no leading space merged into a word's start) with GPT-2's byte tokens", () => {
    expect(tok.tokenize('Hello world')).toEqual(['Hello', 'Ġworld']);
    expect(tok.encode('Hello world')).toEqual([15496, 995]);
    expect(tok.tokenize('numbers 12345')).toEqual(['n', 'umbers', 'Ġ', '123', '45']);
    expect(tok.tokenize('  two  spaces\n\nx')).toEqual(['Ġ', 'Ġtwo', 'Ġ', 'Ġspaces', 'ĊĊ', 'x']);
    expect(tok.encode('<|endoftext|>Hi')).toEqual([100257, tok.tokenToId('Hi')]);
  });
});

describe('family tokenizers at small vocabularies and bad sizes', () => {
  it.each([['llama3', 1024], ['qwen', 700], ['sentencepiece', 600], ['gemma', 1024], ['phi3-mini', 1024], ['dolma2', 1024]] as const)('%s with %i ids still round-trips every text', (style, size) => {
    const { tok } = folder(style, size);
    expect(tok.vocabSize).toBe(size);
    for (const text of TEXTS) expect(tok.decode(tok.encode(text))).toBe(style === 'qwen' ? text.normalize('NFC') : text);
  });
  it('refuses a vocabulary too small for the bytes and special tokens, naming the fix', () => {
    expect(() => familyTokenizerFiles('llama3', { vocabSize: 300 })).toThrow('a llama3 tokenizer needs a vocabulary of at least 512 ids (bytes and special tokens), but vocab_size is 300; raise vocab_size');
    expect(() => familyTokenizerFiles('sentencepiece', { vocabSize: 259 })).toThrow(/at least 260 ids/);
    expect(() => familyTokenizerFiles('gemma', { vocabSize: 364 })).toThrow(/a gemma tokenizer needs a vocabulary of at least 365 ids/);
    expect(() => familyTokenizerFiles('phi3-mini', { vocabSize: 270 })).toThrow(/at least 271 ids/);
    expect(() => familyTokenizerFiles('dolma2', { vocabSize: 278 })).toThrow(/at least 279 ids/);
    expect(() => familyTokenizerFiles('gpt9' as TokenizerStyle, { vocabSize: 1000 })).toThrow('unknown tokenizer style "gpt9"; one of llama3, qwen, sentencepiece, gemma, phi3-mini, dolma2');
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
