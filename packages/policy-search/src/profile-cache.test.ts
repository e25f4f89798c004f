import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModelDescription, type ModelDescription } from '@flexhelm/engine';
import { CALIBRATION_POLICIES, shapeId } from '@flexhelm/cost-model';
import { ensureProfile, loadProfile, profilePath } from './profile-cache.js';
import { machineKey, toShapeKey } from './profile-machine.js';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-profile-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tiny = (hiddenSize: number): ModelDescription =>
  makeModelDescription({ base: 'opt-125m', name: `tiny-${hiddenSize}`, hiddenSize, wordEmbedProjDim: hiddenSize, numAttentionHeads: 4, ffnDim: 4 * hiddenSize, vocabSize: 512, maxPositionEmbeddings: 128 });

describe('ensureProfile (quick, on a tiny shape)', () => {
  const dataDir = join(root, 'data');
  const offloadDir = join(root, 'offload');

  it('measures once, caches per machine, and answers from the cache afterwards', async () => {
    const first = await ensureProfile(tiny(32), { dataDir, offloadDir, quick: true, onednn: false });
    expect(first.measured).toBe(true);
    const file = profilePath(dataDir);
    expect(existsSync(file)).toBe(true);
    const p = first.profile;
    expect(p.key).toEqual(machineKey());
    expect(p.host.f16ToF32Gps.median).toBeGreaterThan(0);
    expect(p.host.diskReadGBs!.median).toBeGreaterThan(0);
    expect(p.host.baseRssBytes).toBeGreaterThan(10 * 2 ** 20);
    const b = p.shapes[shapeId(toShapeKey(tiny(32)))]!.backends['onnxruntime-fp32']!;
    expect(b.rows).toEqual([1, 4, 16, 64, 256]);
    // Decode steps through the engine, resident and streamed, and the first-touch cost of fresh memory.
    expect(b.decode!.rows).toEqual([1, 4, 16]);
    expect(b.decode!.logitsMs.every((x) => x.median > 0)).toBe(true);
    expect(b.decode!.streamedLayerMs).toHaveLength(b.decode!.streamedRows!.length);
    expect(p.host.freshMsPerMB!.median).toBeGreaterThan(0);
    expect(b.residentMs.every((x) => x.min <= x.median && x.median <= x.max && x.samples === 3)).toBe(true);
    // The cost model is fitted to calibration runs of this shape (every calibration policy fits a tiny model).
    expect(b.fit!.runs.map((r) => r.policy)).toEqual(CALIBRATION_POLICIES.map(({ promptLen: _, ...p }) => p));
    expect(b.fit!.runs.every((r) => r.prefillMs > 0 && r.decodeStepMs > 0 && r.peakRssBytes > p.host.baseRssBytes / 2)).toBe(true);
    expect(b.fit!.rmsLogError.time).toBeGreaterThanOrEqual(0);
    for (const v of Object.values(b.fit!.time)) expect(v).toBeGreaterThanOrEqual(0);

    const again = await ensureProfile(tiny(32), { dataDir, offloadDir, quick: true, onednn: false });
    expect(again.measured).toBe(false);
    expect(again.profile).toEqual(p);

    // Another model's shapes are added to the same machine's file; the host figures are kept.
    const other = await ensureProfile(tiny(48), { dataDir, offloadDir, quick: true, onednn: false });
    expect(other.measured).toBe(true);
    expect(other.profile.host).toEqual(p.host);
    expect(Object.keys(other.profile.shapes).sort()).toEqual([shapeId(toShapeKey(tiny(32))), shapeId(toShapeKey(tiny(48)))].sort());
  }, 240_000);

  it('is invalidated when the machine key changes (CPU, cores, RAM or a backend version)', async () => {
    const key = machineKey();
    const changed = { ...key, backends: { ...key.backends, onnxruntime: `${key.backends.onnxruntime}-next` } };
    expect(loadProfile(dataDir, changed)).toBeUndefined();
    expect(profilePath(dataDir, changed)).not.toBe(profilePath(dataDir, key));
    // A file whose recorded key differs from the machine's (e.g. copied from another machine) is not trusted.
    const upgraded = { ...key, cores: key.cores + 1 };
    writeFileSync(profilePath(dataDir, upgraded), JSON.stringify({ ...loadProfile(dataDir, key), key }));
    expect(loadProfile(dataDir, upgraded)).toBeUndefined();
    // A corrupt cache is measured again rather than read.
    writeFileSync(profilePath(dataDir, changed), '{"key": ');
    expect(loadProfile(dataDir, changed)).toBeUndefined();
    const fresh = await ensureProfile(tiny(32), { dataDir, offloadDir, quick: true, onednn: false, key: changed });
    expect(fresh.measured).toBe(true);
    expect(fresh.profile.key).toEqual(changed);
    expect(loadProfile(dataDir, changed)?.key).toEqual(changed);
  }, 240_000);
});
