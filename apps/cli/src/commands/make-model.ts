import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { knownOptNames, makeModel, optConfigFromHf, type MakeModelOptions } from '@flexhelm/engine';
import { writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';
import type { Command } from '../command.js';
import { integerOption } from '../option-values.js';
import { UsageError } from '../usage-error.js';

/** --config: a model name, a config.json (file or folder), or inline JSON (HF snake_case, or engine fields + "base"). */
function configArg(value: string): MakeModelOptions['config'] {
  const text = value.trim();
  if (text.startsWith('{')) {
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`--config is not valid JSON: ${(err as Error).message}`);
    }
    return 'hidden_size' in json ? optConfigFromHf(json, '--config') : (json as MakeModelOptions['config']);
  }
  if (existsSync(text)) {
    const file = statSync(text).isDirectory() ? join(text, 'config.json') : text;
    return optConfigFromHf(JSON.parse(readFileSync(file, 'utf8')), file);
  }
  return text;
}

/** `flexhelm make-model`: a random OPT checkpoint in Hugging Face layout, with the default tokenizer files. */
export const makeModelCommand: Command = {
  name: 'make-model',
  summary: 'Write a random OPT checkpoint (Hugging Face layout) for tests and benchmarks',
  options: {
    config: { type: 'string', valueName: 'C', description: `model size (${knownOptNames().slice(0, 4).join(', ')}, …), a config.json, or inline JSON` },
    out: { type: 'string', short: 'o', valueName: 'DIR', description: 'folder to create (must not exist)' },
    seed: { type: 'string', valueName: 'S', description: 'random seed (default 0)' },
    dtype: { type: 'string', valueName: 'f16|f32', description: 'weight file dtype (default f32); values are float16-exact either way' },
    'no-tokenizer': { type: 'boolean', description: 'do not write the default tokenizer files' },
  },
  details: [
    'Writes config.json, generation_config.json and model.safetensors (tied output projection, `model.` names, as',
    'save_pretrained does), plus the default OPT-shaped GPT-2 BPE tokenizer files when the vocabulary is large',
    'enough for them (≥ 50265 ids). Weights: Linear ~ U with variance 1/fan_in, biases ±0.1, LayerNorm 1 ± 0.25,',
    'embeddings scaled so logits are O(1) — outputs are varied, not degenerate.',
    'Inline JSON takes engine fields (hiddenSize, numHiddenLayers, numAttentionHeads, ffnDim, vocabSize,',
    'maxPositionEmbeddings, wordEmbedProjDim, doLayerNormBefore) on top of "base" (default opt-125m).',
    '',
    'examples:',
    '  flexhelm make-model --config opt-125m --out models/opt-125m-random --dtype f16',
    `  flexhelm make-model --config '{"hiddenSize":64,"numHiddenLayers":2,"numAttentionHeads":4,"vocabSize":50272}' --out tiny`,
  ].join('\n'),
  run({ options, stderr, usageError }) {
    const config = options.config as string | undefined;
    const out = options.out as string | undefined;
    if (!config || !out) throw usageError('give --config C and --out DIR');
    const dtype = (options.dtype as string | undefined) ?? 'f32';
    if (dtype !== 'f16' && dtype !== 'f32') throw usageError(`--dtype must be f16 or f32, got '${dtype}'`);
    let tokenizerNote = '';
    try {
      const c = makeModel({
        config: configArg(config),
        outDir: out,
        seed: integerOption(options.seed, 'seed', 0) ?? 0,
        dtype,
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
      stderr.write(`wrote ${out}: ${c.name}, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, vocab ${c.vocabSize}, ${dtype}${tokenizerNote}\n`);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw usageError((err as Error).message);
    }
  },
};
