import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HelmError } from '@flexhelm/core';
import type { HuggingFaceTokenizer } from './hugging-face-tokenizer.js';
import { LocalWindowService } from './local-window-service.js';

/** What a model folder says about its window and its stop tokens. */
export interface ModelFolderTokens {
  /** config.json's `max_position_embeddings`. */
  maxPositions: number;
  /** generation_config.json's `eos_token_id` (a number or a list), else config.json's, else the tokenizer's EOS. */
  eosTokenIds: number[];
}

function readJsonObject(path: string): Record<string, unknown> | undefined {
  if (!existsSync(path)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new HelmError('ValueError', `${path} is not valid JSON (${(err as Error).message}); fix or remove the file`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new HelmError('ValueError', `${path} must be a JSON object`);
  return json as Record<string, unknown>;
}

function tokenIds(value: unknown, path: string, vocab: number): number[] | undefined {
  if (value === undefined || value === null) return undefined;
  const list = Array.isArray(value) ? value : [value];
  for (const id of list) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocab) {
      throw new HelmError('ValueError', `${path}: eos_token_id holds ${JSON.stringify(id)}; each id must be an integer from 0 to ${vocab - 1}`);
    }
  }
  return list as number[];
}

/** Reads the window size and the stop ids of a Hugging Face model folder. */
export function readModelFolderTokens(folder: string, tokenizer: HuggingFaceTokenizer): ModelFolderTokens {
  const configPath = join(folder, 'config.json');
  const config = readJsonObject(configPath);
  if (!config) throw new HelmError('FileNotFoundError', `${configPath} does not exist; a model folder needs its config.json`);
  const maxPositions = config.max_position_embeddings;
  if (typeof maxPositions !== 'number' || !Number.isInteger(maxPositions) || maxPositions < 2) {
    throw new HelmError('ValueError', `${configPath}: max_position_embeddings is ${JSON.stringify(maxPositions)}; it must be an integer of at least 2`);
  }
  const vocab = typeof config.vocab_size === 'number' ? config.vocab_size : Number.MAX_SAFE_INTEGER;
  const generationPath = join(folder, 'generation_config.json');
  const fromGeneration = tokenIds(readJsonObject(generationPath)?.eos_token_id, generationPath, vocab);
  const eosTokenIds = fromGeneration ?? tokenIds(config.eos_token_id, configPath, vocab) ?? (tokenizer.eosTokenId === undefined ? [] : [tokenizer.eosTokenId]);
  return { maxPositions, eosTokenIds };
}

/**
 * The window of a local model of any family, from its folder: `max_position_embeddings` positions, the tokenizer's
 * EOS as end-of-text token, and the BOS it adds (else the EOS) as the prefix token of language-modeling windows. The
 * engine prepends the BOS to every request, so as for OPT a request holds at most `maxPositions` tokens and a
 * language-modeling window `maxPositions − 1` after its prefix. For an OPT folder this is `localOptWindowService`.
 */
export function modelFolderWindowService(folder: string, tokenizer: HuggingFaceTokenizer): LocalWindowService {
  const { maxPositions } = readModelFolderTokens(folder, tokenizer);
  const token = (id: number | undefined) => (id === undefined ? undefined : tokenizer.idToToken(id));
  const endOfText = token(tokenizer.eosTokenId);
  if (endOfText === undefined) throw new HelmError('ValueError', `${folder}: the tokenizer names no EOS token (eos_token in tokenizer_config.json); HELM's window needs an end-of-text token`);
  const prefix = token(tokenizer.bosTokenId) ?? endOfText;
  return new LocalWindowService(tokenizer, {
    className: 'LocalModelWindowService', tokenizerName: tokenizer.name, maxSequenceLength: maxPositions - 1, maxRequestLength: maxPositions,
    endOfTextToken: endOfText, prefixToken: prefix,
  });
}
