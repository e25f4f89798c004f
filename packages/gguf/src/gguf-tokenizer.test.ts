import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { familyTokenizerFiles, HuggingFaceTokenizer, type TokenizerStyle } from '@flexhelm/tokenizer';
import { afterAll, describe, expect, it } from 'vitest';
import { ggufTokenizer, sentencepieceMerges, TOKEN_TYPE } from './gguf-tokenizer.js';
import { readGguf } from './read-gguf.js';
import { type TestValue, writeTestGguf } from './test-gguf-writer.js';

const root = mkdtempSync(join(tmpdir(), 'gguf-tokenizer-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const TEXTS = ['Hello world', '  The quick brown fox, 12345 jumps!\nnew line\t tab', 'naïve café — ünïcödé 日本語 🙂', "it's what they've done", '<s>inside</s> text'];

/** A family's tokenizer.json stated as llama.cpp's converter states it in GGUF metadata. */
function tokenizerMetadata(style: TokenizerStyle, vocabSize: number): { md: [string, TestValue][]; original: HuggingFaceTokenizer } {
  const files = familyTokenizerFiles(style, { vocabSize, chat: true });
  const original = new HuggingFaceTokenizer(style, files.tokenizerJson, files.config as never);
  const vocab = files.tokenizerJson.model.vocab as Record<string, number>;
  const tokens: string[] = [];
  for (const [t, id] of Object.entries(vocab)) tokens[id] = t;
  const special = new Set<number>();
  for (const a of files.tokenizerJson.added_tokens ?? []) {
    tokens[a.id] = a.content;
    if (a.special) special.add(a.id);
  }
  const merges = (files.tokenizerJson.model.merges as [string, string][]).map((m) => (Array.isArray(m) ? m : String(m).split(' ')) as [string, string]);
  const md: [string, TestValue][] = [['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: tokens }]];
  const idOf = (key: string) => {
    const v = files.config[key];
    return typeof v === 'string' ? tokens.indexOf(v) : -1;
  };
  if (style === 'sentencepiece') {
    // SentencePiece scores: a piece made by merge k scores −k, so ranking pieces by score gives the merge order back.
    const scores = tokens.map(() => 0);
    merges.forEach(([l, r], k) => {
      const id = vocab[l + r];
      if (id !== undefined && scores[id] === 0) scores[id] = -(k + 1);
    });
    const types = tokens.map((t, id) => (id === 0 ? TOKEN_TYPE.unknown : special.has(id) ? TOKEN_TYPE.control : /^<0x[0-9A-F]{2}>$/.test(t) ? TOKEN_TYPE.byte : TOKEN_TYPE.normal));
    md.push(
      ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
      ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', value: scores }],
      ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: types }],
      ['tokenizer.ggml.add_bos_token', { type: 'bool', value: true }],
    );
  } else {
    md.push(
      ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
      ['tokenizer.ggml.pre', { type: 'string', value: style === 'llama3' ? 'llama-bpe' : 'qwen2' }],
      ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', value: merges.map(([l, r]) => `${l} ${r}`) }],
      ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: tokens.map((_, id) => (special.has(id) ? TOKEN_TYPE.control : TOKEN_TYPE.normal)) }],
      ['tokenizer.ggml.add_bos_token', { type: 'bool', value: files.config.add_bos_token === true || idOf('bos_token') >= 0 && style === 'llama3' }],
    );
  }
  if (idOf('bos_token') >= 0) md.push(['tokenizer.ggml.bos_token_id', { type: 'u32', value: idOf('bos_token') }]);
  if (idOf('eos_token') >= 0) md.push(['tokenizer.ggml.eos_token_id', { type: 'u32', value: idOf('eos_token') }]);
  if (typeof files.config.chat_template === 'string') md.push(['tokenizer.chat_template', { type: 'string', value: files.config.chat_template }]);
  return { md, original };
}

/**
 * llama.cpp's SentencePiece tokenizer (llm_tokenizer_spm), stated independently: spaces as ▁ with one prepended,
 * then repeatedly merge the adjacent pair whose concatenation is the best-scoring piece (leftmost on ties); pieces not
 * in the vocabulary fall back to their UTF-8 bytes as <0xNN> tokens.
 */
function spmEncode(text: string, tokens: string[], scores: number[]): number[] {
  const ids = new Map(tokens.map((t, i) => [t, i]));
  const parts = Array.from(`▁${text.replaceAll(' ', '▁')}`);
  for (;;) {
    let best = -1;
    let bestScore = -Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const id = ids.get(parts[i]! + parts[i + 1]!);
      if (id !== undefined && scores[id]! > bestScore) {
        best = i;
        bestScore = scores[id]!;
      }
    }
    if (best < 0) break;
    parts.splice(best, 2, parts[best]! + parts[best + 1]!);
  }
  return parts.flatMap((p) => {
    const id = ids.get(p);
    if (id !== undefined) return [id];
    return [...Buffer.from(p, 'utf8')].map((b) => ids.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)!);
  });
}

describe('ggufTokenizer', () => {
  it.each(['llama3', 'qwen', 'sentencepiece'] as const)('%s: the tokenizer rebuilt from GGUF metadata encodes and decodes as the original', (style) => {
    const { md, original } = tokenizerMetadata(style, style === 'sentencepiece' ? 4000 : 6000);
    const path = join(root, `${style}.gguf`);
    writeTestGguf(path, { metadata: md, tensors: [] });
    const files = ggufTokenizer(readGguf(path));
    const rebuilt = new HuggingFaceTokenizer(`${style}-gguf`, files.tokenizerJson, files.config as never);
    const tokens = md.find(([k]) => k === 'tokenizer.ggml.tokens')![1].value as string[];
    const scores = md.find(([k]) => k === 'tokenizer.ggml.scores')?.[1].value as number[] | undefined;
    for (const text of TEXTS) {
      // A SentencePiece file is tokenized as llama.cpp does (the made tokenizer's merge list is not score-ordered).
      // (Without special tokens in the text: those are split off before the model, by both.)
      if (scores) {
        if (!text.includes('<s>')) expect(rebuilt.encode(text)).toEqual(spmEncode(text, tokens, scores));
      }
      else expect(rebuilt.encode(text)).toEqual(original.encode(text));
      expect(rebuilt.decode(original.encode(text))).toBe(original.decode(original.encode(text)));
    }
    expect(rebuilt.bosTokenId).toBe(original.bosTokenId);
    expect(files.config.chat_template).toEqual(expect.any(String));
  });

  it('rebuilds SentencePiece merges from scores: every split of a piece, best-scoring piece first', () => {
    const tokens = ['<unk>', 'a', 'b', 'c', 'ab', 'bc', 'abc'];
    const merges = sentencepieceMerges(tokens, [0, 0, 0, 0, -1, -3, -2], [2, 1, 1, 1, 1, 1, 1]);
    expect(merges).toEqual([['a', 'b'], ['a', 'bc'], ['ab', 'c'], ['b', 'c']]);
  });

  it('names what it cannot read', () => {
    const path = join(root, 'bad.gguf');
    writeTestGguf(path, { metadata: [['tokenizer.ggml.model', { type: 'string', value: 'bert' }], ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: ['a'] }]], tensors: [] });
    expect(() => ggufTokenizer(readGguf(path))).toThrow(/tokenizer.ggml.model is "bert"; the tokenizers read are gpt2/);
    writeTestGguf(path, { metadata: [['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }], ['tokenizer.ggml.pre', { type: 'string', value: 'deepseek-coder' }], ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: ['a'] }], ['tokenizer.ggml.merges', { type: 'array', itemType: 'string', value: [] }]], tensors: [] });
    expect(() => ggufTokenizer(readGguf(path))).toThrow(/tokenizer.ggml.pre is "deepseek-coder"/);
    writeTestGguf(path, { metadata: [['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }], ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: ['a', 'a'] }]], tensors: [] });
    expect(() => ggufTokenizer(readGguf(path))).toThrow(/holds "a" twice \(ids 0 and 1\)/);
    writeTestGguf(path, { metadata: [], tensors: [] });
    expect(() => ggufTokenizer(readGguf(path))).toThrow(/tokenizer.ggml.model is missing/);
  });
});
