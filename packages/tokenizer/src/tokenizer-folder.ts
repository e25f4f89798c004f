import { existsSync, readFileSync, statSync } from 'node:fs';
import { writeFilesAtomic } from '@flexhelm/atomic-write';
import { basename, join, resolve } from 'node:path';
import { HelmError } from '@flexhelm/core';
import { z } from 'zod';
import { specialTokenContent, tokenizerJsonFromBpeFiles } from './bpe-tokenizer-json.js';
import { optShapedTokenizerFiles } from './embedded-gpt2.js';
import { familyTokenizerFiles, type FamilyTokenizerFiles, type FamilyTokenizerOptions, type TokenizerStyle } from './family-tokenizer-files.js';
import { HuggingFaceTokenizer, type TokenizerConfig, type TokenizerJson } from './hugging-face-tokenizer.js';

const tokenizerJsonSchema = z.looseObject({
  model: z.looseObject({ vocab: z.unknown() }),
  added_tokens: z.array(z.looseObject({ id: z.number().int().nonnegative(), content: z.string() })).optional(),
});
const configSchema = z.record(z.string(), z.unknown());

function readJson(path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new HelmError('ValueError', `${path}: cannot read ${what} (${(err as Error).message}); fix or remove the file`);
  }
}

/** tokenizer_config.json merged with special_tokens_map.json (whose token entries win, as in transformers). */
function readConfig(folder: string): TokenizerConfig {
  const config: Record<string, unknown> = {};
  for (const file of ['tokenizer_config.json', 'special_tokens_map.json']) {
    const path = join(folder, file);
    if (!existsSync(path)) continue;
    const parsed = configSchema.safeParse(readJson(path, file));
    if (!parsed.success) throw new HelmError('ValueError', `${path} must be a JSON object`);
    Object.assign(config, parsed.data);
  }
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token']) {
    if (config[key] !== undefined && config[key] !== null) config[key] = specialTokenContent(config[key]);
  }
  return config as TokenizerConfig;
}

/**
 * Loads the tokenizer of a Hugging Face model folder without network: `tokenizer.json` (+ `tokenizer_config.json`)
 * when present, otherwise `vocab.json` + `merges.txt` converted as transformers' GPT-2 converter does.
 */
export function loadTokenizerFolder(folder: string, name = basename(resolve(folder))): HuggingFaceTokenizer {
  if (!existsSync(folder) || !statSync(folder).isDirectory()) {
    throw new HelmError('FileNotFoundError', `tokenizer folder ${folder} does not exist; pass a model folder that holds tokenizer.json or vocab.json + merges.txt`);
  }
  const config = readConfig(folder);
  const tokenizerJsonPath = join(folder, 'tokenizer.json');
  if (existsSync(tokenizerJsonPath)) {
    const parsed = tokenizerJsonSchema.safeParse(readJson(tokenizerJsonPath, 'tokenizer.json'));
    if (!parsed.success) {
      throw new HelmError('ValueError', `${tokenizerJsonPath} is not a Hugging Face tokenizer file: ${parsed.error.issues[0]?.message} at ${parsed.error.issues[0]?.path.join('.')}`);
    }
    return new HuggingFaceTokenizer(name, { added_tokens: [], ...parsed.data } as TokenizerJson, config);
  }
  const vocabPath = join(folder, 'vocab.json');
  const mergesPath = join(folder, 'merges.txt');
  if (existsSync(vocabPath) && existsSync(mergesPath)) {
    const tokenizerJson = tokenizerJsonFromBpeFiles(readFileSync(vocabPath, 'utf8'), readFileSync(mergesPath, 'utf8'), config);
    return new HuggingFaceTokenizer(name, tokenizerJson, config);
  }
  throw new HelmError('FileNotFoundError', `${folder} has no tokenizer: expected tokenizer.json, or vocab.json and merges.txt (with tokenizer_config.json / special_tokens_map.json for the special tokens)`);
}

/** `vocab.json` in id order (a JS object would move integer-like tokens such as "0" to the front). */
function vocabJsonText(vocab: ReadonlyMap<string, number>): string {
  const entries = [...vocab].sort((a, b) => a[1] - b[1]).map(([token, id]) => `${JSON.stringify(token)}: ${id}`);
  return `{${entries.join(', ')}}\n`;
}

/**
 * Writes the embedded OPT-shaped tokenizer (see {@link optShapedTokenizerFiles}: GPT-2 BPE, OPT special tokens, ids
 * shifted by 4 — not real OPT ids) into `folder`: tokenizer.json, tokenizer_config.json, special_tokens_map.json,
 * vocab.json and merges.txt. Every file is written to a temporary name first and renamed into place.
 */
export function writeOptShapedTokenizerFolder(folder: string): void {
  const files = optShapedTokenizerFiles();
  writeFilesAtomically(folder, [
    ['tokenizer.json', JSON.stringify(files.tokenizerJson)],
    ['tokenizer_config.json', `${JSON.stringify(files.config, null, 2)}\n`],
    ['special_tokens_map.json', `${JSON.stringify(files.specialTokensMap, null, 2)}\n`],
    ['vocab.json', vocabJsonText(files.vocab)],
    ['merges.txt', `#version: 0.2\n${files.merges.join('\n')}\n`],
  ]);
}

/**
 * Writes a family's tokenizer (see {@link familyTokenizerFiles}) into `folder`: tokenizer.json, tokenizer_config.json
 * and special_tokens_map.json, each renamed into place. Returns the files' data (BOS/EOS ids for generation_config.json).
 */
export function writeFamilyTokenizerFolder(folder: string, style: TokenizerStyle, options: FamilyTokenizerOptions): FamilyTokenizerFiles {
  const files = familyTokenizerFiles(style, options);
  writeFilesAtomically(folder, [
    ['tokenizer.json', JSON.stringify(files.tokenizerJson)],
    ['tokenizer_config.json', `${JSON.stringify(files.config, null, 2)}\n`],
    ['special_tokens_map.json', `${JSON.stringify(files.specialTokensMap, null, 2)}\n`],
  ]);
  return files;
}

/** The files are written and synced under temporary names, then renamed into place; none is ever partial. */
function writeFilesAtomically(folder: string, contents: [string, string][]): void {
  writeFilesAtomic(contents.map(([file, text]) => [join(folder, file), text] as const));
}

/** Loads a folder written by {@link writeOptShapedTokenizerFolder} (or any OPT tokenizer folder). */
export function loadOptTokenizer(folder: string, name = 'facebook/opt-66b'): HuggingFaceTokenizer {
  return loadTokenizerFolder(folder, name);
}
