import { f32ToF16Bits, halfToFloatValues } from '@flexhelm/python-compat';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { commitTree, writeFileAtomic } from '@flexhelm/atomic-write';
import { join } from 'node:path';
import { hfConfigJson } from './hf-config-json.js';
import type { FamilyTokenizerStyle } from './families/family-entry.js';
import { FAMILY_BASES, familyEntry, familyOfBase } from './families/registry.js';
import { describeHfConfig } from './llama-description.js';
import { makeModel, type MakeModelOptions } from './families/opt/make-model.js';
import { ModelFileError } from './model-file-error.js';
import { layerTensorsOf, type ModelDescription } from '@flexhelm/contract';
import { knownOptNames } from './families/opt/opt-config.js';
import { optHfConfig } from './families/opt/opt-description.js';
import { hashName, SeededUniform } from '@flexhelm/contract';
import { writeSafetensors, type TensorToWrite } from './safetensors.js';
import { elementCount } from './tensor-source.js';

export type HubDtype = 'f32' | 'f16' | 'bf16';

/** The ids a tokenizer hook reports, written to config.json and generation_config.json. */
export interface TokenizerIds {
  bosTokenId: number | undefined;
  /** One id, or several (instruct models stop on end-of-turn too). */
  eosTokenIds: number[];
  padTokenId: number | undefined;
}

export interface HubModelOptions {
  /**
   * A base name (`llama-3.2-1b`, `qwen2-0.5b`, `opt-125m`, …) or `{ base, chat?, …overrides }` with config.json
   * fields (snake_case) replacing the base's; OPT bases take `makeModel`'s engine fields instead.
   */
  config: string | Record<string, unknown>;
  outDir: string;
  seed?: number;
  dtype?: HubDtype;
  /** Largest shard in bytes: more than that writes `model-0000k-of-0000n.safetensors` and the index. */
  shardSize?: number;
  /**
   * Writes the tokenizer into the (temporary) folder and returns its special ids. `@flexhelm/tokenizer`'s
   * `writeFamilyTokenizerFolder` does it; without a hook the base's published ids are kept where they fit.
   */
  tokenizer?: (dir: string, style: FamilyTokenizerStyle, options: { vocabSize: number; chat: boolean; maxLength: number }) => TokenizerIds;
  /** For OPT bases: adds the tokenizer files (as `makeModel`'s hook). */
  beforeCommit?: MakeModelOptions['beforeCommit'];
}

export interface MadeHubModel {
  description: ModelDescription;
  /** config.json as written. */
  hfConfig: Record<string, unknown>;
  /** The base it was built on. */
  base: string;
  /** What make-model reports: OPT's model name (`opt-125m`), or the family and its base (`gemma2 (gemma-2-2b)`). */
  label: string;
  files: string[];
}

/** Every base name `makeHubModel` takes. */
export function knownHubBases(): string[] {
  return [...Object.keys(FAMILY_BASES), ...knownOptNames()];
}

const TORCH_DTYPE: Record<HubDtype, string> = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' };

/**
 * A Llama-family config.json from a base and overrides, keys sorted as transformers writes them. A changed
 * hidden_size or head count without `head_dim` recomputes `head_dim` (transformers' own default).
 */
export function resolveHubConfig(config: HubModelOptions['config'], dtype: HubDtype = 'bf16'): { base: string; chat: boolean; hf: Record<string, unknown> } {
  const { base = 'llama-3.2-1b', chat = false, ...overrides } = typeof config === 'string' ? { base: config } : (config as Record<string, unknown>);
  if (typeof base !== 'string' || !Object.hasOwn(FAMILY_BASES, base)) throw new ModelFileError(`makeModel: unknown base ${JSON.stringify(base)}; one of ${knownHubBases().join(', ')}`);
  if (typeof chat !== 'boolean') throw new ModelFileError(`makeModel: "chat" is ${JSON.stringify(chat)}; it must be true or false`);
  for (const key of ['model_type', 'architectures', 'torch_dtype']) {
    if (key in overrides) throw new ModelFileError(`makeModel: "${key}" follows from the base and --dtype; pick another base instead of overriding it`);
  }
  const fromBase = FAMILY_BASES[base]!.config;
  const family = familyOfBase(base)!;
  const hf: Record<string, unknown> = { ...fromBase, ...overrides };
  family.make.derive?.(hf, overrides);
  // Published ids that a smaller vocabulary no longer holds are dropped rather than pointing past the table.
  for (const key of ['bos_token_id', 'eos_token_id', 'pad_token_id']) {
    if (overrides[key] === undefined && typeof hf[key] === 'number' && typeof hf.vocab_size === 'number' && (hf[key] as number) >= hf.vocab_size) delete hf[key];
  }
  hf.architectures = [familyEntry(hf.model_type).make.architecture];
  hf.torch_dtype = TORCH_DTYPE[dtype];
  hf.transformers_version = '4.47.1';
  const sorted = Object.fromEntries(Object.keys(hf).sort().map((k) => [k, hf[k]]));
  return { base, chat, hf: sorted };
}

/** Values a random tensor is drawn from (uniform): RMSNorm weights 1 ± 0.25, biases ±0.1, Linear variance 1/fan_in. */
function rangeOf(name: string, shape: number[], d: ModelDescription): { centre: number; halfWidth: number } {
  const sqrt3 = Math.sqrt(3);
  // A (1 + w) RMSNorm (Gemma) stores w: centred on 0 its scale is 1 ± 0.25 like the others'.
  if (name.endsWith('norm.weight')) return { centre: d.norm.kind === 'rmsnorm-plus-one' ? 0 : 1, halfWidth: 0.25 };
  if (name.endsWith('.bias')) return { centre: 0, halfWidth: 0.1 };
  // As OPT's maker: a tied head's logits get a standard deviation of about 2.
  if (name === 'model.embed_tokens.weight') return { centre: 0, halfWidth: (2 / Math.sqrt(d.hiddenSize)) * sqrt3 };
  return { centre: 0, halfWidth: sqrt3 / Math.sqrt(shape[shape.length - 1]!) };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** bf16 bits of a float32 value (round to nearest even; values here are finite). */
function bf16Bits(value: number): number {
  f32[0] = value;
  const w = u32[0]!;
  return ((w + 0x7fff + ((w >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * One random tensor in the file's dtype. Every value is drawn in float32, rounded to bfloat16, then to float16, so it
 * is exact in all three dtypes: the f32, f16 and bf16 folders of one seed hold the same model.
 */
function randomHubTensor(name: string, shape: number[], d: ModelDescription, seed: number, dtype: HubDtype): Float32Array | Uint16Array {
  const { centre, halfWidth } = rangeOf(name, shape, d);
  const rng = new SeededUniform(hashName(name, seed));
  const n = elementCount(shape);
  const out = dtype === 'f32' ? new Float32Array(n) : new Uint16Array(n);
  const halfTable = halfToFloatValues();
  for (let i = 0; i < n; i++) {
    const h = f32ToF16Bits(bf16Value(centre + (2 * rng.next() - 1) * halfWidth));
    out[i] = dtype === 'f16' ? h : dtype === 'f32' ? halfTable[h]! : bf16Bits(halfTable[h]!);
  }
  return out;
}

function bf16Value(value: number): number {
  u32[0] = bf16Bits(value) << 16;
  return f32[0]!;
}

/**
 * Checkpoint tensors in `state_dict()` order (the order `save_pretrained` fills shards in), `[out, in]` shapes. A fused
 * tensor (Phi-3's `qkv_proj`, `gate_up_proj`) is written once, its rows the blocks of every key it holds.
 */
function checkpointTensors(d: ModelDescription): { name: string; shape: number[] }[] {
  const names = d.checkpointNames!;
  const out = [{ name: names.embedding, shape: [d.vocabSize, d.embedding.dim] }];
  // state_dict order: self_attn (q, k, v, o and the q/k norms), mlp (gate, up, down; a mixture of experts' router,
  // experts and shared expert in the description's order, which the stable sort keeps), then the norms in module order.
  const order = ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.qkv_proj', 'self_attn.o_proj', 'self_attn.q_norm', 'self_attn.k_norm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.gate_up_proj', 'mlp.down_proj', '', 'input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm', 'post_feedforward_layernorm'];
  const moeRank = order.indexOf('');
  const rank = (suffix: string) => {
    const at = order.findIndex((o) => o && suffix.startsWith(`${o}.`));
    return (at < 0 ? moeRank : at) * 2 + (suffix.endsWith('.bias') ? 1 : 0);
  };
  for (let i = 0; i < d.layers; i++) {
    // Dense and sparse layers of a mixture of experts hold different tensors.
    const layer = new Map<string, number[]>();
    for (const t of layerTensorsOf(d, i)) {
      const shape = t.shape.length === 2 ? [t.shape[1]!, t.shape[0]!] : [...t.shape];
      const rows = t.checkpointRows;
      if (!rows) layer.set(t.checkpointSuffix, shape);
      else layer.set(t.checkpointSuffix, [Math.max(layer.get(t.checkpointSuffix)?.[0] ?? 0, rows[1]), shape[1]!]);
    }
    const specs = [...layer].sort((a, b) => rank(a[0]) - rank(b[0]));
    for (const [suffix, shape] of specs) out.push({ name: `${names.layerPrefix}${i}.${suffix}`, shape });
  }
  out.push({ name: names.finalNorm, shape: [d.hiddenSize] });
  if (names.head) out.push({ name: names.head, shape: [d.vocabSize, d.hiddenSize] });
  return out;
}

const shardName = (k: number, n: number) => `model-${String(k).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`;

const optBaseName = (config: HubModelOptions['config']) => (typeof config === 'string' ? config : config.base);

/** Whether a `config` is an OPT one: an OPT base, or no base and OPT's engine fields (camelCase, as `makeModel` takes them). */
function isOptHubConfig(config: HubModelOptions['config']): boolean {
  const base = optBaseName(config);
  if (typeof config === 'object' && base === undefined && Object.keys(config).some((k) => /[A-Z]/.test(k))) return true;
  return typeof base === 'string' && (base.startsWith('opt-') || knownOptNames().includes(base));
}

/** The file dtype `makeHubModel` writes by default for a config: f32 for OPT (its published weights are f16), bf16 otherwise. */
export function defaultHubDtype(config: HubModelOptions['config']): HubDtype {
  return isOptHubConfig(config) ? 'f32' : 'bf16';
}

/**
 * Writes a random model of any supported family in the Hub layout: config.json and generation_config.json as
 * transformers 4.47.1 writes them, safetensors (f32/f16/bf16, sharded with an index past `shardSize`), and through
 * the `tokenizer` hook the family's tokenizer. The folder appears complete or not at all. OPT bases go to `makeModel`.
 */
export function makeHubModel(options: HubModelOptions): MadeHubModel {
  const dtype = options.dtype ?? 'bf16';
  const seed = options.seed ?? 0;
  if (isOptHubConfig(options.config)) return makeOpt(options, (optBaseName(options.config) as string | undefined) ?? 'opt-125m', dtype, seed);
  const { base, chat, hf } = resolveHubConfig(options.config, dtype);
  const description = describeHfConfig(hf, '--config');
  if (options.shardSize !== undefined && !(Number.isInteger(options.shardSize) && options.shardSize > 0)) {
    throw new ModelFileError(`makeModel: shard size ${options.shardSize} must be a positive whole number of bytes`);
  }
  if (existsSync(options.outDir)) throw new ModelFileError(`makeModel: ${options.outDir} already exists; choose a new folder or delete it first`);
  const tmp = `${options.outDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  try {
    // Node's recursive mkdir reports a read-only parent as ENOENT: name the folder and what to do instead.
    mkdirSync(tmp, { recursive: true });
  } catch (err) {
    throw new ModelFileError(`makeModel: cannot create ${options.outDir} (${(err as Error).message}); choose a folder on a writable file system`);
  }
  try {
    const ids = options.tokenizer?.(tmp, FAMILY_BASES[base]!.tokenizer, { vocabSize: description.vocabSize, chat, maxLength: description.maxPositions });
    if (ids) {
      hf.bos_token_id = ids.bosTokenId ?? null;
      hf.eos_token_id = ids.eosTokenIds.length === 1 ? ids.eosTokenIds[0] : ids.eosTokenIds;
      if (ids.padTokenId !== undefined || 'pad_token_id' in hf) hf.pad_token_id = ids.padTokenId ?? null;
    }
    writeFileAtomic(join(tmp, 'config.json'), hfConfigJson(hf));
    const generation: Record<string, unknown> = { _from_model_config: true };
    if (hf.bos_token_id !== undefined && hf.bos_token_id !== null) generation.bos_token_id = hf.bos_token_id;
    if (hf.eos_token_id !== undefined) generation.eos_token_id = hf.eos_token_id;
    if (ids?.padTokenId !== undefined) generation.pad_token_id = ids.padTokenId;
    generation.transformers_version = '4.47.1';
    writeFileAtomic(join(tmp, 'generation_config.json'), hfConfigJson(generation));
    const files = writeWeights(tmp, description, seed, dtype, options.shardSize);
    commitTree(tmp, options.outDir);
    return { description, hfConfig: hf, base, label: `${description.family} (${base})`, files };
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** model.safetensors, or shards filled in state_dict order as `save_pretrained(max_shard_size=…)` fills them. */
function writeWeights(dir: string, d: ModelDescription, seed: number, dtype: HubDtype, shardSize: number | undefined): string[] {
  const bytesEach = dtype === 'f32' ? 4 : 2;
  const fileDtype = ({ f32: 'F32', f16: 'F16', bf16: 'BF16' } as const)[dtype];
  const toWrite = checkpointTensors(d).map(({ name, shape }): TensorToWrite => ({ name, shape, dtype: fileDtype, data: () => randomHubTensor(name, shape, d, seed, dtype) }));
  const shards: TensorToWrite[][] = [[]];
  let inShard = 0;
  let total = 0;
  for (const t of toWrite) {
    const bytes = elementCount(t.shape) * bytesEach;
    if (shardSize !== undefined && inShard > 0 && inShard + bytes > shardSize) {
      shards.push([]);
      inShard = 0;
    }
    shards[shards.length - 1]!.push(t);
    inShard += bytes;
    total += bytes;
  }
  if (shards.length === 1) {
    writeSafetensors(join(dir, 'model.safetensors'), shards[0]!);
    return ['model.safetensors'];
  }
  const names = shards.map((_, k) => shardName(k + 1, shards.length));
  shards.forEach((tensors, k) => {
    writeSafetensors(join(dir, names[k]!), tensors);
  });
  const weightMap: Record<string, string> = {};
  const entries = shards.flatMap((tensors, k) => tensors.map((t) => [t.name, names[k]!] as const)).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  for (const [name, file] of entries) weightMap[name] = file;
  writeFileAtomic(join(dir, 'model.safetensors.index.json'), `${JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2)}\n`);
  return [...names, 'model.safetensors.index.json'];
}

function makeOpt(options: HubModelOptions, base: string, dtype: HubDtype, seed: number): MadeHubModel {
  if (dtype === 'bf16') throw new ModelFileError('makeModel: OPT checkpoints are written in f16 or f32 (the published OPT weights are float16); pass --dtype f16 or f32');
  if (options.shardSize !== undefined) throw new ModelFileError('makeModel: --shard-size applies to the Llama family; OPT checkpoints are written as one model.safetensors');
  const { chat, ...rest }: Record<string, unknown> = typeof options.config === 'string' ? { base } : { base, ...options.config };
  if (chat) throw new ModelFileError('makeModel: OPT has no chat template; drop "chat"');
  const made = makeModel({ config: rest as MakeModelOptions['config'], outDir: options.outDir, seed, dtype, beforeCommit: options.beforeCommit });
  const hfConfig = optHfConfig(made, dtype === 'f16' ? 'float16' : 'float32');
  const description = describeHfConfig(hfConfig);
  return { description, hfConfig, base, label: description.name, files: ['model.safetensors'] };
}
