import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopbackFileServer } from '@flexhelm/downloads/testing';
import { makeHubModel, makeModel, readFolderModel, readModelDescription } from '@flexhelm/engine';
import { writeFamilyTokenizerFolder, writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import { exportGguf } from '@flexhelm/gguf';
import { DEFAULT_MODEL, resolveModel } from './resolve-model.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-resolve-'));
const source = join(root, 'source');
let server: LoopbackFileServer;
const savedEndpoint = process.env.HF_ENDPOINT;

/** Serves a model folder in the Hub's layout: `/<repo>/resolve/main/<file>`. */
function serveRepo(repo: string, folder: string, skip: string[] = []): void {
  for (const file of readdirSync(folder)) if (!skip.includes(file)) server.set(`/${repo}/resolve/main/${file}`, readFileSync(join(folder, file)));
}

beforeAll(async () => {
  makeModel({ config: { hiddenSize: 32, numHiddenLayers: 1, numAttentionHeads: 2, vocabSize: 50272 }, outDir: source, seed: 1, beforeCommit: (d) => writeOptShapedTokenizerFolder(d) });
  server = await LoopbackFileServer.start();
  process.env.HF_ENDPOINT = server.baseUrl;
});

afterAll(async () => {
  await server.close();
  if (savedEndpoint === undefined) delete process.env.HF_ENDPOINT;
  else process.env.HF_ENDPOINT = savedEndpoint;
  rmSync(root, { recursive: true, force: true });
});

describe('resolveModel from the Hugging Face Hub layout', () => {
  it('downloads config, tokenizer and weights once, marks the folder complete, then works offline', async () => {
    serveRepo('acme/tiny-opt', source);
    const dataDir = join(root, 'data-a');
    const r = await resolveModel({ model: 'acme/tiny-opt', dataDir });
    expect(r.folder).toBe(join(dataDir, 'models', 'acme--tiny-opt'));
    expect(existsSync(join(r.folder, '.complete'))).toBe(true);
    expect(readFileSync(join(r.folder, 'model.safetensors')).equals(readFileSync(join(source, 'model.safetensors')))).toBe(true);
    expect(readFolderModel(r.folder).hiddenSize).toBe(32);
    const again = await resolveModel({ model: 'acme/tiny-opt', dataDir, offline: true });
    expect(again.folder).toBe(r.folder);
  });

  it('follows a sharded safetensors index', async () => {
    const sharded = join(root, 'sharded');
    mkdirSync(sharded);
    for (const f of readdirSync(source)) if (f !== 'model.safetensors') writeFileSync(join(sharded, f), readFileSync(join(source, f)));
    // one shard holding every tensor is enough to exercise the index
    writeFileSync(join(sharded, 'model-00001-of-00001.safetensors'), readFileSync(join(source, 'model.safetensors')));
    writeFileSync(join(sharded, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'model.decoder.embed_tokens.weight': 'model-00001-of-00001.safetensors' } }));
    serveRepo('acme/sharded-opt', sharded);
    const r = await resolveModel({ model: 'acme/sharded-opt', dataDir: join(root, 'data-b') });
    expect(existsSync(join(r.folder, 'model-00001-of-00001.safetensors'))).toBe(true);
    expect(existsSync(join(r.folder, 'model.safetensors'))).toBe(false);
  });

  it('explains a missing model offline, missing safetensors, and never marks a failed download complete', async () => {
    await expect(resolveModel({ model: 'acme/absent', dataDir: join(root, 'data-c'), offline: true })).rejects.toThrow(
      /acme\/absent is not in .*acme--absent and downloads are off \(--offline\)\. Put its Hugging Face files there/,
    );
    serveRepo('acme/bin-only', source, ['model.safetensors']);
    const dataDir = join(root, 'data-d');
    await expect(resolveModel({ model: 'acme/bin-only', dataDir })).rejects.toThrow(/has no safetensors weights/);
    expect(existsSync(join(dataDir, 'models', 'acme--bin-only', '.complete'))).toBe(false);
  });

  it('refuses weights that do not match the model named', async () => {
    serveRepo('facebook/opt-125m', source);
    await expect(resolveModel({ model: 'facebook/opt-125m', dataDir: join(root, 'data-e') })).rejects.toThrow(
      /do not match facebook\/opt-125m: hiddenSize is 32, expected 768/,
    );
  });
});

describe('resolveModel from --path and the embedded default', () => {
  it('finds the folder itself or <path>/<name>, and says where it looked otherwise', async () => {
    expect((await resolveModel({ model: 'acme/tiny-opt', path: source, dataDir: root })).folder).toBe(source);
    expect((await resolveModel({ model: 'acme/source', path: root, dataDir: root })).folder).toBe(source);
    await expect(resolveModel({ model: 'acme/nothing', path: root, dataDir: root })).rejects.toThrow(/no weights for acme\/nothing under --path .*looked for a config\.json in/);
  });

  it('makes the embedded default model once', async () => {
    const dataDir = join(root, 'data-default');
    const r = await resolveModel({ model: DEFAULT_MODEL, dataDir });
    expect(readFolderModel(r.folder).layers).toBe(4);
    expect(existsSync(join(r.folder, 'tokenizer.json'))).toBe(true);
    const mtime = readFileSync(join(r.folder, 'config.json'));
    expect(readFileSync(join((await resolveModel({ model: DEFAULT_MODEL, dataDir })).folder, 'config.json'))).toEqual(mtime);
  });
});

describe('resolveModel for a gated Llama-family repository', () => {
  const llama = join(root, 'llama-source');
  const token = 'hf_test_secret_0123456789';
  beforeAll(() => {
    const config = { base: 'llama-3.2-1b', hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 64, vocab_size: 600 };
    makeHubModel({ config, outDir: llama, seed: 2, shardSize: 40_000, tokenizer: (dir, style, o) => writeFamilyTokenizerFolder(dir, style, o) });
    serveRepo('meta-llama/Llama-tiny', llama);
  });
  afterAll(() => server.requireToken(undefined));

  it('says in one line that the model is gated and what to do, without a token and with a refused one', async () => {
    server.requireToken(token);
    const logs: string[] = [];
    const noToken = resolveModel({ model: 'meta-llama/Llama-tiny', dataDir: join(root, 'gated-a'), env: { HF_ENDPOINT: server.baseUrl }, log: (m) => logs.push(m) });
    await expect(noToken).rejects.toThrow(/^meta-llama\/Llama-tiny is gated or private: the Hub answered 401 for config\.json\. Set HF_TOKEN to an access token .* accept the licence on http:\/\/127\.0\.0\.1:\d+\/meta-llama\/Llama-tiny/);
    const err = (await noToken.catch((e: Error) => e)) as Error;
    expect(err.message).not.toContain('\n');
    const refused = resolveModel({ model: 'meta-llama/Llama-tiny', dataDir: join(root, 'gated-b'), env: { HF_ENDPOINT: server.baseUrl, HF_TOKEN: 'hf_wrong_token' } });
    await expect(refused).rejects.toThrow(/the Hub answered 403 for config\.json\. The HF_TOKEN sent was refused: accept the licence on .*meta-llama\/Llama-tiny with the account of that token/);
    const refusedMessage = ((await refused.catch((e: Error) => e)) as Error).message;
    expect(refusedMessage).not.toContain('hf_wrong_token');
    expect(existsSync(join(root, 'gated-a', 'models', 'meta-llama--Llama-tiny', '.complete'))).toBe(false);
  });

  it('sends HF_TOKEN as a Bearer token and downloads the Hub layout (index, shards, tokenizer) into place', async () => {
    server.requireToken(token);
    server.requests.length = 0;
    const logs: string[] = [];
    const r = await resolveModel({ model: 'meta-llama/Llama-tiny', dataDir: join(root, 'gated-c'), env: { HF_ENDPOINT: server.baseUrl, HF_TOKEN: token }, log: (m) => logs.push(m) });
    expect(server.requests.length).toBeGreaterThan(5);
    expect(server.requests.every((q) => q.authorization === `Bearer ${token}`)).toBe(true);
    const shards = readdirSync(llama).filter((f) => f.startsWith('model-'));
    expect(shards.length).toBeGreaterThan(1);
    for (const f of [...shards, 'model.safetensors.index.json', 'config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json']) {
      expect(readFileSync(join(r.folder, f)).equals(readFileSync(join(llama, f)))).toBe(true);
    }
    expect(readModelDescription(r.folder).attention.kvHeads).toBe(2);
    expect(logs.join('\n')).not.toContain(token);
  });

  it('refuses a model_type it cannot run before downloading its weights', async () => {
    server.requireToken(undefined);
    server.set('/acme/gpt2-like/resolve/main/config.json', JSON.stringify({ model_type: 'gpt2', n_embd: 8 }));
    server.set('/acme/gpt2-like/resolve/main/model.safetensors', 'never fetched');
    server.requests.length = 0;
    await expect(resolveModel({ model: 'acme/gpt2-like', dataDir: join(root, 'data-gpt2'), env: { HF_ENDPOINT: server.baseUrl } })).rejects.toThrow(/model_type is "gpt2"; supported: opt, llama, mistral, qwen2/);
    expect(server.requests.map((q) => q.path)).toEqual(['/acme/gpt2-like/resolve/main/config.json']);
  });
});

describe('resolveModel for --model <folder>', () => {
  it('uses a model folder given as --model as it is, and says what is missing otherwise', async () => {
    const r = await resolveModel({ model: source, dataDir: join(root, 'data-folder') });
    expect(r).toEqual({ name: source, folder: source, layout: 'huggingface' });
    await expect(resolveModel({ model: join(root, 'nowhere'), dataDir: join(root, 'data-folder') })).rejects.toThrow(/--model .*nowhere: no such folder$/);
    mkdirSync(join(root, 'empty-folder'), { recursive: true });
    await expect(resolveModel({ model: join(root, 'empty-folder'), dataDir: join(root, 'data-folder') })).rejects.toThrow(
      /--model .*empty-folder is a path, but no model folder is there \(no config\.json\)\. Give a folder in the Hugging Face layout \(config\.json, safetensors, tokenizer files\), a GGUF file, or a Hub name such as meta-llama\/Llama-3\.2-1B/,
    );
  });

  it('reads a GGUF file (or the one a folder holds) once into a folder of its config and tokenizer in the data dir, and names a folder with several', async () => {
    const hub = join(root, 'llama-for-gguf');
    makeHubModel({ config: { base: 'llama-3.2-1b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 1, intermediate_size: 96, vocab_size: 600 }, outDir: hub, dtype: 'f32', tokenizer: (dir, style, o) => writeFamilyTokenizerFolder(dir, style, o) });
    const ggufDir = join(root, 'gguf-folder');
    exportGguf({ folder: hub, out: join(ggufDir, 'tiny.gguf'), type: 'Q8_0' });
    const dataDir = join(root, 'data-gguf');
    const logs: string[] = [];
    const byFile = await resolveModel({ model: join(ggufDir, 'tiny.gguf'), dataDir, log: (m) => logs.push(m) });
    expect(byFile.layout).toBe('huggingface');
    expect(byFile.folder.startsWith(join(dataDir, 'models', 'gguf--tiny-'))).toBe(true);
    expect(readModelDescription(byFile.folder).layers).toBe(1);
    expect(logs.join('\n')).toMatch(/reading .*tiny\.gguf \(llama, 12 tensors\): its config and tokenizer to .*; the weights are read from the file/);
    expect(byFile.gguf).toBe(join(ggufDir, 'tiny.gguf'));
    // The folder holding it resolves to the same folder, without reading the file again.
    const byFolder = await resolveModel({ model: ggufDir, dataDir, log: (m) => logs.push(m) });
    expect(byFolder.folder).toBe(byFile.folder);
    expect(logs.filter((m) => m.startsWith('reading'))).toHaveLength(1);
    writeFileSync(join(ggufDir, 'other.gguf'), 'GGUF');
    await expect(resolveModel({ model: ggufDir, dataDir })).rejects.toThrow(/holds 2 GGUF files \(other\.gguf, tiny\.gguf\); pass --model the one to run/);
    await expect(resolveModel({ model: join(ggufDir, 'other.gguf'), dataDir })).rejects.toThrow(/other\.gguf: not a valid GGUF file: version needs 4 bytes/);
  });
});
