import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel } from './make-model.js';
import { ModelFileError } from '../../model-file-error.js';
import { checkOptConfig, optConfigByName, optConfigFromHf, optConfigToHf, readOptConfig } from './opt-config.js';
import { optDescription } from './opt-description.js';
import { Engine } from '../../engine.js';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-cfg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const hf = (over: Record<string, unknown>) => ({ ...optConfigToHf(optConfigByName('opt-125m'), 'float16'), ...over });

function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected an error');
}

describe('config sanity', () => {
  it('accepts every published size, opt-175b included', () => {
    for (const name of ['opt-125m', 'opt-350m', 'opt-30b', 'opt-66b', 'opt-175b']) {
      const c = optConfigByName(name);
      expect(optConfigFromHf(optConfigToHf(c, 'float16'))).toEqual({ ...c, name });
    }
  });

  it('names the field, value and allowed range of every size out of bounds', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ num_hidden_layers: 1e9 }, /cfg\.json: num_hidden_layers is 1000000000; it must be an integer from 1 to 1024 \(opt-175b has 96\)/],
      [{ num_hidden_layers: 0 }, /num_hidden_layers is 0; it must be an integer from 1 to 1024/],
      [{ hidden_size: 768.5 }, /hidden_size is 768\.5; it must be an integer from 1 to 65536 \(opt-175b has 12288\)/],
      [{ vocab_size: -3 }, /vocab_size is -3; it must be an integer from 1 to 1048576/],
      [{ ffn_dim: 1e7 }, /ffn_dim is 10000000; it must be an integer from 1 to 262144/],
      [{ max_position_embeddings: 2 ** 40 }, /max_position_embeddings is 1099511627776; it must be an integer from 1 to 1048576/],
      [{ num_attention_heads: 5000 }, /num_attention_heads is 5000; it must be an integer from 1 to 1024/],
      [{ word_embed_proj_dim: 1e6 }, /word_embed_proj_dim is 1000000; it must be an integer from 1 to 65536/],
      [{ num_attention_heads: 7 }, /cfg\.json: hidden_size 768 is not divisible by num_attention_heads 7/],
      [{ hidden_size: 65536, num_attention_heads: 64, ffn_dim: 262144 }, /cfg\.json: the fc1 \(ffn_dim × hidden_size\) tensor would hold 17179869184 values, more than the 2147483647/],
      [{ vocab_size: 1048576, word_embed_proj_dim: 65536 }, /embed_tokens \(vocab_size × word_embed_proj_dim\) tensor would hold/],
      [{ hidden_size: 65536, num_attention_heads: 64, ffn_dim: 1024, word_embed_proj_dim: 1024 }, /the q_proj \(hidden_size × hidden_size\) tensor would hold 4294967296 values/],
      [{ hidden_size: '768' }, /cfg\.json is not a valid OPT config: hidden_size:/],
      [{ num_hidden_layers: null }, /num_hidden_layers:/],
    ];
    for (const [over, message] of cases) {
      const err = errorOf(() => optConfigFromHf(hf(over), 'cfg.json'));
      expect(err, JSON.stringify(over)).toBeInstanceOf(ModelFileError);
      expect(err.message, JSON.stringify(over)).toMatch(message);
    }
  });

  it('keeps bos/eos/pad_token_id inside the vocabulary (null means the OPT default)', () => {
    expect(errorOf(() => optConfigFromHf(hf({ eos_token_id: 50272 }), 'cfg.json')).message).toMatch(/cfg\.json: eos_token_id is 50272; it must be a token id from 0 to 50271 \(vocab_size 50272\)/);
    expect(errorOf(() => optConfigFromHf(hf({ bos_token_id: -1 }), 'cfg.json')).message).toMatch(/bos_token_id is -1; it must be a token id from 0 to 50271/);
    expect(errorOf(() => optConfigFromHf(hf({ pad_token_id: 1.5 }), 'cfg.json')).message).toMatch(/pad_token_id is 1\.5/);
    // A vocabulary of 2 has no id 2 for OPT's default bos/eos.
    expect(errorOf(() => optConfigFromHf(hf({ vocab_size: 2, bos_token_id: null, eos_token_id: 1, pad_token_id: 0 }), 'cfg.json')).message).toMatch(/bos_token_id is 2; it must be a token id from 0 to 1/);
    expect(optConfigFromHf(hf({ pad_token_id: null, bos_token_id: null, eos_token_id: 0 }))).toMatchObject({ padTokenId: 1, bosTokenId: 2, eosTokenId: 0 });
  });

  it('knows torch_dtype', () => {
    expect(optConfigFromHf(hf({ torch_dtype: 'bfloat16' })).hiddenSize).toBe(768);
    expect(optConfigFromHf(hf({ torch_dtype: null })).hiddenSize).toBe(768);
    expect(errorOf(() => optConfigFromHf(hf({ torch_dtype: 'int4' }), 'cfg.json')).message).toMatch(/cfg\.json is not a valid OPT config: torch_dtype:/);
  });

  it('checks configs built in code the same way (makeModel, Engine.load with a config)', () => {
    expect(() => checkOptConfig({ ...optConfigByName('opt-125m'), numHiddenLayers: 2000 }, 'here')).toThrow(/here: numHiddenLayers is 2000; it must be an integer from 1 to 1024/);
    expect(() => makeModel({ config: { numHiddenLayers: 1e9 }, outDir: join(dir, 'never') })).toThrow(/makeModel: numHiddenLayers is 1000000000/);
  });

  it('refuses num_hidden_layers: 1e9 at once, before anything is allocated from it', async () => {
    const folder = join(dir, 'huge');
    makeModel({ config: { name: 'tiny', hiddenSize: 16, numHiddenLayers: 1, numAttentionHeads: 2, vocabSize: 50, maxPositionEmbeddings: 8 }, outDir: folder });
    writeFileSync(join(folder, 'config.json'), JSON.stringify(hf({ hidden_size: 16, num_attention_heads: 2, ffn_dim: 64, vocab_size: 50, max_position_embeddings: 8, num_hidden_layers: 1e9 })));
    const rss = process.memoryUsage().rss;
    const started = Date.now();
    expect(() => readOptConfig(folder)).toThrow(/config\.json: num_hidden_layers is 1000000000/);
    await expect(Engine.load(folder, { backend: 'reference' })).rejects.toThrow(ModelFileError);
    const config = optDescription({ ...optConfigByName('opt-125m'), numHiddenLayers: 1e9 });
    await expect(Engine.load(folder, { backend: 'reference', config })).rejects.toThrow(/numHiddenLayers is 1000000000/);
    // Generous bounds for a loaded machine: without the check this grows memory until the process dies.
    expect(Date.now() - started).toBeLessThan(5000);
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * 2 ** 20);
  });

  it('reports unreadable and non-JSON config files as model file errors', () => {
    const folder = join(dir, 'garbage');
    mkdirSync(folder);
    expect(() => readOptConfig(folder)).toThrow(ModelFileError);
    writeFileSync(join(folder, 'config.json'), '{"vocab_size": 5');
    expect(errorOf(() => readOptConfig(folder))).toBeInstanceOf(ModelFileError);
    writeFileSync(join(folder, 'config.json'), '[1, 2]');
    expect(errorOf(() => readOptConfig(folder)).message).toMatch(/config\.json is not a valid OPT config: \(root\)/);
  });

  it('never blocks on a FIFO and never reads a huge file as config.json', () => {
    const folder = join(dir, 'fifo');
    mkdirSync(folder);
    execFileSync('mkfifo', [join(folder, 'config.json')]);
    // Without the check readFileSync waits for a writer forever.
    expect(() => readOptConfig(folder)).toThrow(/model config .*fifo\/config\.json is not a regular file/);
    const huge = join(dir, 'huge-config');
    mkdirSync(huge);
    writeFileSync(join(huge, 'config.json'), '');
    truncateSync(join(huge, 'config.json'), 100 * 2 ** 20); // sparse: 100 MiB of zeros
    expect(() => readOptConfig(huge)).toThrow(/config\.json is 104857600 bytes, more than the 67108864/);
  });
});
