import { existsSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '@flexhelm/atomic-write';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { familyOfConfig, type ModelDescription } from '@flexhelm/engine';
import { shapeId, type MachineKey, type MachineProfile, type ShapeKey } from '@flexhelm/cost-model';
import { profilingError } from './profiling-error.js';
import { machineKey, profileHost, profileShape, type ProfileOptions } from './profile-machine.js';
import { toShapeKey } from './profiled-model.js';
import { calibrateShape } from './calibrate.js';

/** The cache file of a machine's profile under the data dir: one file per machine key (a changed key is a new file). */
export function profilePath(dataDir: string, key: MachineKey = machineKey()): string {
  const hash = createHash('sha256').update(JSON.stringify(key)).digest('hex').slice(0, 16);
  return join(dataDir, 'profiles', `machine-${hash}.json`);
}

const sameKey = (a: MachineKey, b: MachineKey): boolean => JSON.stringify(a) === JSON.stringify(b);

/** The cached profile for `key`, or undefined when there is none or it was taken on different hardware or software. */
export function loadProfile(dataDir: string, key: MachineKey = machineKey()): MachineProfile | undefined {
  const file = profilePath(dataDir, key);
  if (!existsSync(file)) return undefined;
  try {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as MachineProfile;
    return sameKey(profile.key, key) ? profile : undefined;
  } catch {
    // A truncated or hand-edited file is re-measured rather than trusted.
    return undefined;
  }
}

export function saveProfile(dataDir: string, profile: MachineProfile): string {
  const file = profilePath(dataDir, profile.key);
  writeFileAtomic(file, `${JSON.stringify(profile, null, 2)}\n`);
  return file;
}

/**
 * The OPT model a stored OPT shape stands for, through OPT's own config parser (the key fixes the widths; the layer count
 * comes from each stored run).
 */
function storedOptModel(s: ShapeKey, layers: number, maxPositions: number): ModelDescription {
  // No model_type: an `ffn_dim` config is OPT's (`familyOfConfig`), as the facebook/opt-* files that predate the key.
  const json = {
    _name_or_path: `stored-${shapeId(s)}`, vocab_size: s.vocabSize, hidden_size: s.hiddenSize, num_hidden_layers: layers,
    num_attention_heads: s.numHeads, ffn_dim: s.ffnDim, max_position_embeddings: maxPositions, word_embed_proj_dim: s.wordEmbedProjDim ?? s.hiddenSize,
  };
  return familyOfConfig(json, 'a stored profile shape').describe(json, 'a stored profile shape');
}

export interface EnsureProfileOptions extends ProfileOptions {
  dataDir: string;
  /** Re-measure even when a cached profile covers the request. */
  refresh?: boolean;
  /** The machine key to use (default: this machine's); tests pass another to check invalidation. */
  key?: MachineKey;
}

/**
 * The machine profile covering the model's shapes (any family's description, OPT's included: its own layer is
 * timed and cached under its family's key), and the offload folder's disk when given: the cached one when it has
 * everything, otherwise measured (only the missing parts) and cached. A quick profile is upgraded when a full one is
 * asked for.
 */
export async function ensureProfile(config: ModelDescription, options: EnsureProfileOptions): Promise<{ profile: MachineProfile; measured: boolean }> {
  const key = options.key ?? machineKey();
  const cached = options.refresh ? undefined : loadProfile(options.dataDir, key);
  const quick = options.quick ?? false;
  const usable = cached && (quick || !cached.quick) ? cached : undefined;
  const id = shapeId(toShapeKey(config));
  const needHost = !usable || (options.offloadDir !== undefined && usable.host.offloadDir !== options.offloadDir);
  const needShape = !usable?.shapes[id];
  if (!needHost && !needShape) return { profile: usable!, measured: false };
  const t0 = performance.now();
  const host = needHost ? await profileHost(options) : usable!.host;
  const shapes = { ...(usable?.shapes ?? {}) };
  if (needShape) {
    try {
      shapes[id] = await profileShape(config, options);
    } catch (err) {
      throw profilingError(`${config.name}'s shapes (hidden ${config.hiddenSize}, vocabulary ${config.vocabSize})`, err);
    }
  }
  const profile: MachineProfile = {
    key,
    createdAt: new Date().toISOString(),
    quick: usable ? usable.quick && quick : quick,
    tookMs: 0,
    host,
    shapes,
  };
  if (options.calibrate ?? true) {
    // A new shape is calibrated; shapes already fitted are fitted again to their stored runs when the host changed.
    if (needShape) {
      try {
        calibrateShape(config, profile, options);
      } catch (err) {
        throw profilingError(`the calibration runs of ${config.name}'s shapes`, err);
      }
    }
    if (needHost) {
      for (const [sid, s] of Object.entries(shapes)) {
        if (sid === id && needShape) continue;
        if (!Object.values(s.backends).some((b) => b.fit)) continue;
        // This model's own shape, or an OPT shape rebuilt from its key; another family's layer cannot be rebuilt from
        // its key alone and keeps its fit until that model is profiled again (--refresh).
        const cfg = sid === id ? config : s.shape.family ? undefined : storedOptModel(s.shape, config.layers, config.maxPositions);
        if (cfg) calibrateShape(cfg, profile, { ...options, reuseRuns: true });
      }
    }
  }
  profile.tookMs = performance.now() - t0 + (usable?.tookMs ?? 0);
  saveProfile(options.dataDir, profile);
  return { profile, measured: true };
}
