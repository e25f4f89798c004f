import { f32ToF16Bits } from '@flexhelm/python-compat';
import { mkdirSync, rmSync, existsSync } from 'node:fs';
import { commitTree, writeFileAtomic } from '@flexhelm/atomic-write';
import { join } from 'node:path';
import type { ModelDescription } from '@flexhelm/contract';
import { checkOptConfig, optConfigByName, optConfigToHf, type OptConfig } from './opt-config.js';
import { optDescription, type OptLayerTensorKey } from './opt-description.js';
import { optTensorShapes } from './opt-weights.js';
import { randomTensor } from '../../random-weights.js';
import { hfConfigJson } from '../../hf-config-json.js';
import { writeSafetensors } from '../../safetensors.js';

/**
 * make-model's OPT config: a published size's fields (`knownOptNames`, default opt-125m) replaced by the ones given, in
 * the engine's camelCase names (`hiddenSize`, `numHiddenLayers`, `numAttentionHeads`, `ffnDim`, `vocabSize`,
 * `maxPositionEmbeddings`, `wordEmbedProjDim`, `doLayerNormBefore`, `layerNormEps`, the token ids, `name`).
 */
export type OptMakeConfig = Partial<OptConfig> & { base?: string };

export interface MakeModelOptions {
  /** A published size (`opt-125m`, …) or fields on top of `base` (default opt-125m). */
  config: string | OptMakeConfig;
  outDir: string;
  seed?: number;
  dtype?: 'f16' | 'f32';
  /** Called with the (temporary) folder before it is renamed into place, to add files such as a tokenizer. */
  beforeCommit?: (dir: string, description: ModelDescription) => void;
}

/** The validated description `makeModel` writes for `MakeModelOptions.config` (a tiny OPT shape for tests and benches). */
export function makeModelDescription(config: MakeModelOptions['config']): ModelDescription<OptLayerTensorKey> {
  return optDescription(resolveConfig(config));
}

/** Resolves `MakeModelOptions.config` to a full, validated config. */
export function resolveConfig(config: MakeModelOptions['config']): OptConfig {
  if (typeof config === 'string') return optConfigByName(config);
  const { base, ...rest } = config;
  const c: OptConfig = { ...optConfigByName(base ?? 'opt-125m'), ...rest };
  if (!config.name) c.name = `${c.name}-custom`;
  if (rest.hiddenSize !== undefined && rest.wordEmbedProjDim === undefined) c.wordEmbedProjDim = c.hiddenSize;
  if (rest.hiddenSize !== undefined && rest.ffnDim === undefined) c.ffnDim = 4 * c.hiddenSize;
  checkOptConfig(c, 'makeModel');
  return c;
}

/**
 * Writes a random OPT checkpoint in Hugging Face layout (config.json, generation_config.json, model.safetensors with
 * `model.`-prefixed names and the output projection tied to embed_tokens, as `save_pretrained` writes it). Every value
 * is exactly representable in float16, so the f16 and f32 files of one seed hold the same model. The folder appears
 * complete or not at all (written beside, synced, then renamed: `commitTree`).
 */
export function makeModel(options: MakeModelOptions): ModelDescription {
  const c = resolveConfig(options.config);
  const description = optDescription(c);
  const dtype = options.dtype ?? 'f32';
  const seed = options.seed ?? 0;
  if (existsSync(options.outDir)) throw new Error(`makeModel: ${options.outDir} already exists; choose a new folder or delete it first`);
  const tmp = `${options.outDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    writeFileAtomic(join(tmp, 'config.json'), hfConfigJson(optConfigToHf(c, dtype === 'f16' ? 'float16' : 'float32')));
    const generation = { _from_model_config: true, bos_token_id: c.bosTokenId, eos_token_id: c.eosTokenId, pad_token_id: c.padTokenId, transformers_version: '4.33.3' };
    writeFileAtomic(join(tmp, 'generation_config.json'), hfConfigJson(generation));
    const tensors = [...optTensorShapes(c)].map(([name, shape]) => ({
      name: `model.${name}`,
      shape,
      dtype: dtype === 'f16' ? ('F16' as const) : ('F32' as const),
      data: () => {
        const values = randomTensor(name, shape, description, seed, true);
        if (dtype === 'f32') return values;
        const bits = new Uint16Array(values.length);
        for (let i = 0; i < values.length; i++) bits[i] = f32ToF16Bits(values[i]!);
        return bits;
      },
    }));
    writeSafetensors(join(tmp, 'model.safetensors'), tensors);
    options.beforeCommit?.(tmp, description);
    commitTree(tmp, options.outDir);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return description;
}
