import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { defaultHubDtype, knownHubBases, makeConfigFromHf, makeHubModel, type HubModelOptions } from '@flexhelm/engine';
import { writeFamilyTokenizerFolder, writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import type { Command } from '../command.js';
import { integerOption } from '../option-values.js';
import { UsageError } from '../usage-error.js';

/**
 * --config: a base name, a config.json (file or folder), or inline JSON: `{"base": …, …overrides}` (config.json fields for
 * the rotary families; OPT's engine fields, or an OPT config.json's snake_case fields, for OPT). A config.json builds on
 * its family's first base (the family entry converts it).
 */
function configArg(value: string): HubModelOptions['config'] {
  const text = value.trim();
  if (text.startsWith('{')) {
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`--config is not valid JSON: ${(err as Error).message}`);
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new UsageError('--config must be a JSON object');
    return 'base' in json || !('hidden_size' in json) ? json : makeConfigFromHf(json, '--config');
  }
  if (existsSync(text)) {
    const file = statSync(text).isDirectory() ? join(text, 'config.json') : text;
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new UsageError(`${file} is not a readable JSON config (${(err as Error).message})`);
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new UsageError(`${file} must hold a JSON object (a config.json)`);
    return makeConfigFromHf(json as Record<string, unknown>, file);
  }
  return text;
}

/** `--shard-size`: bytes, or a size as `save_pretrained` writes it (`500MB` = 500·10⁶, `2GiB` = 2·2³⁰). */
function shardSizeArg(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$/i.exec(value);
  const unit = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30 }[(m?.[2] ?? 'b').toLowerCase() as 'b'];
  const bytes = m ? Math.floor(Number(m[1]) * unit) : Number.NaN;
  if (!(bytes > 0)) throw new UsageError(`--shard-size must be a size such as 2000000, 500MB or 2GiB, got '${value}'`);
  return bytes;
}

/** `flexhelm make-model`: a random checkpoint of any supported family in the Hub layout, with its tokenizer. */
export const makeModelCommand: Command = {
  name: 'make-model',
  summary: 'Write a random checkpoint of any supported family (Hugging Face layout) for tests and benchmarks',
  options: {
    config: { type: 'string', valueName: 'C', description: `base (${knownHubBases().slice(0, 5).join(', ')}, …), a config.json, or inline JSON` },
    out: { type: 'string', short: 'o', valueName: 'DIR', description: 'folder to create (must not exist)' },
    seed: { type: 'string', valueName: 'S', description: 'random seed (default 0)' },
    dtype: { type: 'string', valueName: 'f32|f16|bf16', description: 'weight file dtype (default bf16; f32 for OPT, whose checkpoints are f16/f32)' },
    'shard-size': { type: 'string', valueName: 'SIZE', description: 'largest shard (e.g. 2GB): writes model-0000k-of-0000n.safetensors + index' },
    'no-tokenizer': { type: 'boolean', description: 'do not write the tokenizer files' },
  },
  details: [
    'Writes config.json and generation_config.json as transformers 4.47.1 writes them, safetensors with the family\'s',
    'tensor names (`model.embed_tokens.weight`, `model.layers.N.self_attn.q_proj.weight`, …, `lm_head.weight` unless',
    'tied; Phi-3\'s fused qkv_proj / gate_up_proj), and the family\'s tokenizer: Llama 3, Qwen2 and OLMo 2 byte-level',
    'BPE, Llama 2 / Mistral / Phi-3 and Gemma sentencepiece BPE with byte fallback (vocabularies derived from GPT-2\'s',
    'embedded files; special tokens at the family\'s places).',
    `Bases: ${knownHubBases().join(', ')}.`,
    'Inline JSON: {"base": B, …} with config.json fields to override (hidden_size, num_hidden_layers,',
    'num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, rope_theta, rope_scaling,',
    'sliding_window, tie_word_embeddings, …) and "chat": true for the instruct tokenizer (chat_template, end-of-turn',
    'EOS). A config.json (file or folder) builds on its family\'s first base. OPT bases take engine fields (hiddenSize, numHiddenLayers, numAttentionHeads, ffnDim, vocabSize, …).',
    'Weights: Linear ~ U with variance 1/fan_in, norms 1 ± 0.25, every value exact in bf16 and f16, so the f32, f16',
    'and bf16 folders of one seed hold the same model.',
    '',
    'examples:',
    '  flexhelm make-model --config llama-3.2-1b --out models/llama-3.2-1b-random',
    `  flexhelm make-model --config '{"base":"qwen2-0.5b","num_hidden_layers":2,"chat":true}' --out qwen-tiny --dtype f32`,
    '  flexhelm make-model --config llama-3.1-8b --out llama-8b --shard-size 5GB',
    `  flexhelm make-model --config '{"base":"gemma-2-2b","num_hidden_layers":2,"chat":true}' --out gemma-tiny`,
    '  flexhelm make-model --config opt-125m --out models/opt-125m-random --dtype f16',
  ].join('\n'),
  run({ options, stderr, usageError }) {
    const config = options.config as string | undefined;
    const out = options.out as string | undefined;
    if (!config || !out) throw usageError('give --config C and --out DIR');
    const dtype = options.dtype as string | undefined;
    if (dtype !== undefined && dtype !== 'f16' && dtype !== 'f32' && dtype !== 'bf16') throw usageError(`--dtype must be f32, f16 or bf16, got '${dtype}'`);
    let tokenizerNote = '';
    try {
      const resolved = configArg(config);
      const fileDtype = (dtype as 'f32' | 'f16' | 'bf16' | undefined) ?? defaultHubDtype(resolved);
      const made = makeHubModel({
        config: resolved,
        outDir: out,
        seed: integerOption(options.seed, 'seed', 0) ?? 0,
        dtype: fileDtype,
        shardSize: shardSizeArg(options['shard-size'] as string | undefined),
        tokenizer: options['no-tokenizer']
          ? undefined
          : (dir, style, o) => {
              const files = writeFamilyTokenizerFolder(dir, style, o);
              tokenizerNote = ` with a ${style} tokenizer${o.chat ? ' (chat template)' : ''}`;
              return files;
            },
        beforeCommit: (dir, c) => {
          if (options['no-tokenizer']) return;
          if (c.vocabSize < 50265) {
            tokenizerNote = ` (no tokenizer: vocabulary ${c.vocabSize} is smaller than the default tokenizer's)`;
            return;
          }
          writeOptShapedTokenizerFolder(dir);
          tokenizerNote = ' with the default tokenizer';
        },
      });
      const d = made.description;
      const shards = made.files.length > 1 ? `, ${made.files.length - 1} shards` : '';
      stderr.write(`wrote ${out}: ${made.label}, ${d.layers} layers, hidden ${d.hiddenSize}, vocab ${d.vocabSize}, ${fileDtype}${shards}${tokenizerNote}\n`);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw usageError((err as Error).message);
    }
  },
};
