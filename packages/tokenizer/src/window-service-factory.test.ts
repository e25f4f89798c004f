import type { Tokenizer, WindowService } from '@flexhelm/core';
import { describe, expect, it } from 'vitest';
import type { Ai21WindowService, Ai21Token, Ai21TokenizerApi } from './ai21-window-service.js';
import { CountingTokenizer } from './counting-tokenizer.js';
import { getTokenizer } from './get-tokenizer.js';
import { LocalWindowService } from './local-window-service.js';
import { GPT2_TEST_TOKENS, TEST_PROMPT } from './test-helm-prompt.js';
import { getWindowService, gpt2WindowService } from './window-service-factory.js';

describe('OPTWindowService (HELM test_opt_window_service.py, OPT-shaped tokenizer)', () => {
  const ws = getWindowService('together/opt-175b');

  it('has OPT limits and tokens', () => {
    expect([ws.maxSequenceLength, ws.maxRequestLength, ws.endOfTextToken, ws.prefixToken]).toEqual([2048, 2049, '</s>', '</s>']);
  });

  it('tokenizes TEST_PROMPT into 51 tokens and round-trips it', () => {
    expect(ws.tokenize(TEST_PROMPT)).toEqual(GPT2_TEST_TOKENS);
    expect(ws.getNumTokens(TEST_PROMPT)).toBe(51);
    expect(ws.decode(ws.encode(TEST_PROMPT))).toBe(TEST_PROMPT);
  });

  it('fits with 2049 - 51 completion tokens, not with one more', () => {
    expect(ws.fitsWithinContextWindow(TEST_PROMPT, ws.maxRequestLength - 51)).toBe(true);
    expect(ws.fitsWithinContextWindow(TEST_PROMPT, ws.maxRequestLength - 51 + 1)).toBe(false);
  });

  it('truncates TEST_PROMPT * 45 to exactly 2049 tokens', () => {
    const long = TEST_PROMPT.repeat(45);
    expect(ws.fitsWithinContextWindow(long)).toBe(false);
    const cut = ws.truncateFromRight(long);
    expect(ws.getNumTokens(cut)).toBe(2049);
    expect(ws.fitsWithinContextWindow(cut)).toBe(true);
    expect(long.startsWith(cut)).toBe(true);
  });
});

describe('GPT2WindowService (HELM test_gpt2_window_service.py)', () => {
  const ws = getWindowService('huggingface/gpt2');

  it('matches HELM', () => {
    expect(ws.maxRequestLength).toBe(1025);
    expect(ws.getNumTokens(TEST_PROMPT)).toBe(51);
    expect(ws.fitsWithinContextWindow(TEST_PROMPT, 1025 - 51)).toBe(true);
    expect(ws.fitsWithinContextWindow(TEST_PROMPT, 1025 - 51 + 1)).toBe(false);
    const cut = ws.truncateFromRight(TEST_PROMPT.repeat(41));
    expect(ws.getNumTokens(cut)).toBe(1025);
    expect(ws.truncateFromRight("their 'studio'", 0)).toBe("their 'studio'");
  });
});

describe('truncateFromRight where decode(encode) does not round-trip', () => {
  /** Characters as tokens, but decoding expands the ligature ﬁ to "fi" (as a normalizing tokenizer would). */
  const ligatureTokenizer: Tokenizer = {
    name: 'ligature',
    encode: (text, o = {}) => (o.truncation ? [...text].slice(0, o.maxLength) : [...text]),
    decode: (tokens) => tokens.join('').replaceAll('ﬁ', 'fi'),
    tokenize: (text) => [...text],
  };

  it('drops tokens until the decoded cut fits (HELM 0.2.1 would fail its assertion)', () => {
    const ws = new LocalWindowService(ligatureTokenizer, { className: 'Tiny', tokenizerName: 'ligature', maxSequenceLength: 2, maxRequestLength: 3, endOfTextToken: '', prefixToken: '' });
    expect(ws.truncateFromRight('abﬁﬁ')).toBe('ab');
    expect(ws.truncateFromRight('abcﬁ')).toBe('abc');
    expect(ws.truncateFromRight('ﬁﬁﬁﬁ')).toBe('');
  });

  it('leaves byte-level BPE cuts inside a character as HELM does (U+FFFD re-encodes to no more tokens)', () => {
    const ws = new LocalWindowService(getTokenizer('huggingface/gpt2'), { className: 'Tiny', tokenizerName: 'huggingface/gpt2', maxSequenceLength: 4, maxRequestLength: 5, endOfTextToken: '', prefixToken: '' });
    const cut = ws.truncateFromRight('ab 🌍🌍🌍');
    expect(cut).toBe('ab 🌍\ufffd');
    expect(ws.getNumTokens(cut)).toBeLessThanOrEqual(5);
  });

  it('refuses a completion longer than the window', () => {
    expect(() => gpt2WindowService().truncateFromRight('x', 2000)).toThrow(/Truncation failed: .* lower max_tokens/);
  });
});

describe('tokenizer calls', () => {
  it('counts one tokenization request per encode/tokenize and one decode request per decode, as HELM', () => {
    const counting = new CountingTokenizer(getTokenizer('whitespace-stub'));
    const ws: WindowService = getWindowService('together/opt-66b', { tokenizer: counting });
    ws.fitsWithinContextWindow('a b c', 5);
    expect(counting.calls).toEqual({ tokenize: 1, decode: 0 });
    ws.truncateFromRight('a b c', 2047);
    expect(counting.calls).toEqual({ tokenize: 3, decode: 1 });
  });
});

describe('getWindowService', () => {
  it('builds the local OPT window with the BOS guard', () => {
    const ws = getWindowService('local/opt-1.3b');
    expect([ws.maxSequenceLength, ws.maxRequestLength]).toEqual([2047, 2048]);
    expect(getWindowService('facebook/opt-125m', { maxPositions: 512 }).maxRequestLength).toBe(512);
    expect(ws.tokenizer.encode('</s>')).toEqual([2]);
  });

  it('explains unsupported models', () => {
    expect(() => getWindowService('openai/davinci')).toThrow(/cannot run offline/);
    expect(() => getWindowService('nobody/model')).toThrow(/Unhandled model name: nobody\/model/);
    expect(() => getWindowService('ai21/j1-jumbo')).toThrow(/AI21's web API/);
    expect(() => getWindowService('local/x', { maxPositions: 1 })).toThrow(/maxPositions/);
  });
});

/**
 * AI21's tokenizer only exists behind AI21's API, so this stand-in gives AI21-shaped answers (▁-prefixed words with
 * text ranges) to exercise HELM's AI21WindowService logic.
 */
class WordRangeTokenizer implements Ai21TokenizerApi {
  tokenize(text: string): { text: string; tokens: Ai21Token[] } {
    const tokens = [...text.matchAll(/\s*\S+/g)].map((m) => ({ value: `▁${m[0].trim()}`, textRange: { start: m.index, end: m.index + m[0].length } }));
    return { text, tokens };
  }
}

describe('AI21WindowService logic (stand-in tokenizer)', () => {
  const ws = getWindowService('ai21/j1-jumbo', { ai21Tokenizer: new WordRangeTokenizer() }) as Ai21WindowService;

  it('has AI21 limits and counts with AI21 tokens', () => {
    expect([ws.maxSequenceLength, ws.maxRequestLength, ws.endOfTextToken, ws.prefixToken]).toEqual([2047, 2047, ' ', '']);
    expect(ws.getNumTokens('a b  c')).toBe(3);
    expect(ws.fitsWithinContextWindow('w '.repeat(2047), 0)).toBe(true);
    expect(ws.fitsWithinContextWindow('w '.repeat(2047), 1)).toBe(false);
  });

  it('truncates by text ranges', () => {
    const text = Array.from({ length: 3000 }, (_, i) => `w${i}`).join(' ');
    const cut = ws.truncateFromRight(text, 47);
    expect(ws.getNumTokens(cut)).toBe(2000);
    expect(cut.endsWith(' w1999')).toBe(true);
  });

  it('decodes from text ranges and byte tokens', () => {
    const { text, tokens } = ws.encodeWithRanges('hello big world');
    expect(ws.decodeTokens(tokens.slice(1), text)).toBe(' big world');
    const bytes: Ai21Token[] = [{ value: '<0xC3>', textRange: { start: 0, end: 1 } }];
    expect(ws.decodeTokens(bytes, 'x')).toBe('\ufffd');
  });
});
