import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { writeFileAtomic } from '@flexhelm/atomic-write';
import { basename, join } from 'node:path';
import { DownloadError, ensureFileDownloaded, huggingFaceFileUrl } from '@flexhelm/downloads';
import { ggufInFolder, importGguf, isGgufPath } from '@flexhelm/gguf';
import { descriptionByName, isOptShaped, makeModel, readFolderModel, readModelDescription, type ModelDescription } from '@flexhelm/engine';
import { writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import { sweepStaleModelTemps } from './sweep-stale-model-temps.js';

/** The embedded default: a small random OPT made on first use, so the main job runs with no download. */
export const DEFAULT_MODEL = 'flexhelm/opt-tiny-random';
const DEFAULT_MODEL_CONFIG = { base: 'opt-125m', name: 'opt-tiny-random', hiddenSize: 128, numHiddenLayers: 4, numAttentionHeads: 4, vocabSize: 50272 };

export interface ResolveModelOptions {
  /** `facebook/opt-1.3b`, `opt-125m`, or the embedded default `flexhelm/opt-tiny-random`. */
  model: string;
  /** FlexLLMGen's `--path`: a folder with the weights (Hugging Face layout, or `<name>-np` numpy folders), or above it. */
  path?: string;
  /** Where downloaded and generated models are kept (`<dataDir>/models/<owner>--<name>`). */
  dataDir: string;
  offline?: boolean;
  /** Hub revision (branch, tag or commit). */
  revision?: string;
  log?: (message: string) => void;
  onProgress?: (file: string, bytesDone: number, bytesTotal: number | undefined) => void;
  /** Where `HF_TOKEN` and `HF_ENDPOINT` are read (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

export interface ResolvedModel {
  /** The model name as given. */
  name: string;
  /** What to pass to `Engine.load`. */
  folder: string;
  layout: 'huggingface' | 'flexllmgen-numpy';
  /** For numpy folders (no config.json): the model its name says it is. */
  config?: ModelDescription;
  /** The GGUF file the folder was converted from (its ggml blocks can be multiplied as stored). */
  gguf?: string;
}

const isDir = (p: string) => existsSync(p) && statSync(p).isDirectory();
const shortName = (model: string) => model.slice(model.lastIndexOf('/') + 1);

/** The sizes `checkMatches` compares, by the name its message gives each. */
const MATCHED_SIZES: [string, (d: ModelDescription) => number][] = [
  ['hiddenSize', (d) => d.hiddenSize],
  ['layers', (d) => d.layers],
  ['heads', (d) => d.attention.heads],
  ['intermediateSize', (d) => d.mlp.intermediateSize],
  ['vocabSize', (d) => d.vocabSize],
];

/** Refuses a folder whose config does not match the architecture its name promises (a published OPT size). */
function checkMatches(model: string, folder: string): void {
  let expected: ModelDescription;
  try {
    expected = descriptionByName(model);
  } catch {
    return; // not a published size: any config goes
  }
  // Only OPT's published sizes are checked: other built-in names are make-model bases, which folders shrink at will.
  if (!isOptShaped(expected)) return;
  const found = readFolderModel(folder);
  if (found.family !== expected.family) {
    throw new Error(`the weights in ${folder} do not match ${model}: they are a ${found.family} model, not ${expected.family}. Point --path at the right folder or pass the --model that these weights are.`);
  }
  const wrong = MATCHED_SIZES.filter(([, size]) => size(found) !== size(expected));
  if (wrong.length) {
    throw new Error(
      `the weights in ${folder} do not match ${model}: ${wrong.map(([k, size]) => `${k} is ${size(found)}, expected ${size(expected)}`).join(', ')}. ` +
        'Point --path at the right folder or pass the --model that these weights are.',
    );
  }
}

/** Finds the weights of `model` under FlexLLMGen's `--path`: the folder itself, `<path>/<name>`, or `<path>/<name>-np`. */
function fromPath(model: string, path: string): ResolvedModel {
  if (!existsSync(path)) throw new Error(`--path ${path}: no such folder`);
  const name = shortName(model);
  const candidates = [path, join(path, name), join(path, model.replace('/', '--'))];
  for (const folder of candidates) {
    if (isDir(folder) && existsSync(join(folder, 'config.json'))) {
      checkMatches(model, folder);
      return { name: model, folder, layout: 'huggingface' };
    }
  }
  const npCandidates = [path.replace(/\/+$/, '').endsWith('-np') ? path : join(path, `${name}-np`)];
  for (const folder of npCandidates) {
    if (isDir(folder) && existsSync(join(folder, 'decoder.embed_tokens.weight'))) {
      let config: ModelDescription;
      try {
        config = descriptionByName(basename(folder).replace(/-np$/, ''));
      } catch (err) {
        throw new Error(`${folder} holds FlexLLMGen numpy weights but its name does not say which OPT size it is: ${(err as Error).message}`);
      }
      return { name: model, folder, layout: 'flexllmgen-numpy', config };
    }
  }
  throw new Error(
    `no weights for ${model} under --path ${path}: looked for a config.json in ${candidates.join(', ')} and for FlexLLMGen numpy files in ${npCandidates.join(', ')}. ` +
      'Give --path the folder that holds config.json and model.safetensors (Hugging Face layout) or <name>-np (FlexLLMGen).',
  );
}

/** Makes the embedded default model on first use (atomic: the folder appears complete or not at all). */
function defaultModel(dataDir: string, log?: (m: string) => void): ResolvedModel {
  const folder = join(dataDir, 'models', DEFAULT_MODEL.replace('/', '--'));
  if (!existsSync(join(folder, 'config.json'))) {
    log?.(`making the embedded default model ${DEFAULT_MODEL} (random weights) in ${folder}`);
    mkdirSync(join(dataDir, 'models'), { recursive: true });
    try {
      makeModel({ config: DEFAULT_MODEL_CONFIG, outDir: folder, seed: 0, dtype: 'f16', beforeCommit: (dir) => writeOptShapedTokenizerFolder(dir) });
    } catch (err) {
      // Another process may have made it at the same moment.
      if (!existsSync(join(folder, 'config.json'))) throw err;
    }
  }
  return { name: DEFAULT_MODEL, folder, layout: 'huggingface' };
}

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt'];

/**
 * Downloads `model` from the Hugging Face Hub's file layout (`resolve/<revision>/<file>`, sharded safetensors
 * indexes included) into `<dataDir>/models/<owner>--<name>`, each file atomically and resumably; a `.complete`
 * marker is written last, so a half-downloaded model is never used. Offline, a missing model is an error naming what
 * is missing and where to put it.
 */
async function fromHub(options: ResolveModelOptions): Promise<ResolvedModel> {
  const { model, dataDir } = options;
  const repo = model.includes('/') ? model : `facebook/${model}`; // as @flexhelm/session's helmModelName
  const folder = join(dataDir, 'models', repo.replace('/', '--'));
  if (existsSync(join(folder, '.complete'))) return { name: model, folder, layout: 'huggingface' };
  if (options.offline) {
    throw new Error(
      `${model} is not in ${folder} and downloads are off (--offline). Put its Hugging Face files there (config.json, ` +
        `model.safetensors or model.safetensors.index.json with its shards, tokenizer.json or vocab.json + merges.txt) ` +
        `and create an empty ${join(folder, '.complete')}, or pass --path with a folder that holds them, or drop --offline.`,
    );
  }
  mkdirSync(folder, { recursive: true });
  const env = options.env ?? process.env;
  // Gated models (Llama, some Mistral) need an access token; it travels only in this header, never in a message.
  const token = env.HF_TOKEN?.trim();
  const headers = token ? { authorization: `Bearer ${token}` } : undefined;
  const get = async (file: string, optional = false): Promise<boolean> => {
    try {
      await ensureFileDownloaded({
        url: huggingFaceFileUrl(repo, file, { revision: options.revision, env }),
        targetPath: join(folder, file),
        headers,
        env,
        onProgress: (p) => options.onProgress?.(file, p.bytesDone, p.bytesTotal),
      });
      return true;
    } catch (err) {
      if (optional && err instanceof DownloadError && err.status === 404) return false;
      if (err instanceof DownloadError && (err.status === 401 || err.status === 403)) throw gatedError(repo, file, err.status, Boolean(token), env);
      throw err;
    }
  };
  options.log?.(`downloading ${repo} into ${folder}${token ? ' (with HF_TOKEN)' : ''}`);
  await get('config.json');
  // A family this cannot run is refused before gigabytes of weights are fetched (the error names model_type).
  readModelDescription(folder);
  await get('generation_config.json', true);
  for (const f of TOKENIZER_FILES) await get(f, true);
  if (!existsSync(join(folder, 'tokenizer.json')) && !(existsSync(join(folder, 'vocab.json')) && existsSync(join(folder, 'merges.txt')))) {
    throw new Error(`${repo} has neither tokenizer.json nor vocab.json + merges.txt; flexhelm needs one of them to tokenize prompts`);
  }
  if (await get('model.safetensors.index.json', true)) {
    const index = JSON.parse(readFileSync(join(folder, 'model.safetensors.index.json'), 'utf8')) as { weight_map?: Record<string, string> };
    const shards = [...new Set(Object.values(index.weight_map ?? {}))];
    if (shards.length === 0) throw new Error(`${join(folder, 'model.safetensors.index.json')} lists no shards`);
    for (const shard of shards) await get(shard);
  } else if (!(await get('model.safetensors', true))) {
    throw new Error(
      `${repo} has no safetensors weights (model.safetensors or model.safetensors.index.json); flexhelm does not read PyTorch .bin pickles. ` +
        'Convert them with transformers (save_pretrained(..., safe_serialization=True)) and pass the folder with --path.',
    );
  }
  checkMatches(model, folder);
  const marker = join(folder, '.complete');
  writeFileAtomic(marker, new Date().toISOString());
  return { name: model, folder, layout: 'huggingface' };
}

/** The one-line error for a 401/403 from the Hub: gated or private, and what to do about it. */
function gatedError(repo: string, file: string, status: number, tokenSent: boolean, env: NodeJS.ProcessEnv): Error {
  const page = `${env.HF_ENDPOINT?.replace(/\/+$/, '') || 'https://huggingface.co'}/${repo}`;
  const what = tokenSent
    ? `The HF_TOKEN sent was refused: accept the licence on ${page} with the account of that token (access is granted per account, sometimes after a review), or use a token with read access.`
    : `Set HF_TOKEN to an access token (${page.replace(`/${repo}`, '')}/settings/tokens) of an account that has accepted the licence — accept the licence on ${page} first.`;
  return new Error(`${repo} is gated or private: the Hub answered ${status} for ${file}. ${what}`);
}

/**
 * Whether `--model` names a folder or file on disk rather than a Hub repository: written as a path, an existing
 * folder, or an existing `.gguf` file.
 */
export function isModelFolder(model: string): boolean {
  if (/^(\/|\.\.?(\/|$)|~)/.test(model)) return true;
  if (isGgufPath(model) && existsSync(model)) return true;
  // `owner/name` is a Hub id unless a folder of that name is right here (then the folder is what runs).
  return model.split('/').length > 2 || isDir(model);
}

/** Where the weights of `model` are: `--path`, the embedded default, or the Hub cache (downloading if needed). */
export async function resolveModel(options: ResolveModelOptions): Promise<ResolvedModel> {
  // A model maker killed mid-way leaves its temporary folder; the next start clears those of dead processes.
  for (const folder of sweepStaleModelTemps(options.dataDir)) options.log?.(`removed ${folder}, left by a model maker that did not finish`);
  if (options.path) return fromPath(options.model, options.path);
  if (options.model === DEFAULT_MODEL) return defaultModel(options.dataDir, options.log);
  if (isModelFolder(options.model)) {
    if (!existsSync(options.model)) throw new Error(`--model ${options.model}: no such ${isGgufPath(options.model) ? 'file' : 'folder'}`);
    // A GGUF file, or a folder holding one and no config.json: converted once to a model folder in the data dir.
    const gguf = isDir(options.model) ? (existsSync(join(options.model, 'config.json')) ? undefined : ggufInFolder(options.model)) : options.model;
    if (gguf !== undefined) return { name: options.model, folder: importGguf(gguf, options.dataDir, options.log).folder, layout: 'huggingface', gguf };
    if (!existsSync(join(options.model, 'config.json'))) {
      throw new Error(`--model ${options.model} is a path, but no model folder is there (no config.json). Give a folder in the Hugging Face layout (config.json, safetensors, tokenizer files), a GGUF file, or a Hub name such as meta-llama/Llama-3.2-1B`);
    }
    return { name: options.model, folder: options.model, layout: 'huggingface' };
  }
  return fromHub(options);
}

/** Removes partial downloads of a model folder that never completed (for `flexhelm clean`-style commands and tests). */
export function removeIncompleteModel(folder: string): void {
  if (isDir(folder) && !existsSync(join(folder, '.complete')) && readdirSync(folder).length > 0) rmSync(folder, { recursive: true, force: true });
}
