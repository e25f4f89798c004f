// A hand-made machine profile with round numbers, so the cost model's results can be worked out by hand in tests.
import { shapeId, type BackendProfile, type DecodeProbe, type MachineProfile } from './machine-profile.js';
import type { Measured } from './measured.js';
import type { ModelShape } from '@flexhelm/offload/plan';

const m = (median: number): Measured => ({ median, min: median, max: median, samples: 1 });

/** h 64, ffn 256, 2 layers, 4 heads, vocab 100, 62 positions. */
export const SHAPE: ModelShape = { numLayers: 2, hiddenSize: 64, ffnDim: 256, numHeads: 4, vocabSize: 100, maxPositions: 62 };

function backend(name = 'onnxruntime-fp32'): BackendProfile {
  return {
    backend: name,
    rows: [1, 10],
    residentMs: [m(1.1), m(2.1)],
    streamedMs: [m(1.6), m(3.1)],
    setWeightsMs: m(0.5),
    linearGflops: [0, 0],
    decodeAttnMsPerRowToken: 0.001,
    ownedDecodeAttnMsPerRowToken: 0.0005,
    prefillAttnMsPerRowToken2: 0.0001,
    headRows: [1, 10],
    headMs: [m(0.5), m(1.4)],
    embedMsPerRow: 0.01,
    roundTripMs: m(0.1),
  };
}

export function testProfile(overrides: Partial<MachineProfile['host']> = {}): MachineProfile {
  const id = shapeId({ hiddenSize: 64, ffnDim: 256, numHeads: 4, vocabSize: 100, wordEmbedProjDim: 64 });
  return {
    key: { cpuModel: 'test', cpuFlags: '', cores: 2, totalRamBytes: 2 ** 34, backends: {}, schema: 1 },
    createdAt: '2026-01-01T00:00:00Z',
    quick: true,
    tookMs: 0,
    host: {
      copyGBs: m(1), f16ToF32Gps: m(1), dequant4Gps: m(0.5), diskReadGBs: m(1), diskWriteGBs: m(1),
      freeRamBytes: 2 ** 33, freeDiskBytes: 2 ** 40, baseRssBytes: 100e6, ...overrides,
    },
    shapes: { [id]: { shape: { hiddenSize: 64, ffnDim: 256, numHeads: 4, vocabSize: 100, wordEmbedProjDim: 64 }, backends: { 'onnxruntime-fp32': backend() } } },
  };
}

/** A decode probe with round numbers (rows 1 and 10, context 5). */
export const PROBE: DecodeProbe = {
  rows: [1, 10],
  context: 5,
  directLayerMs: [m(1), m(2)],
  streamedLayerMs: [m(2), m(4)],
  directMsPerRowToken: 0.001,
  streamedMsPerRowToken: 0.002,
  microBatchMsPerByte: 1e-6,
  logitsMs: [m(3), m(4)],
  streamedLogitsMs: [m(5), m(6)],
  sampleMsPerRow: 0.1,
  handOverMs: m(0.7),
};

/** The test profile with the decode probe (what profiles of schema 2 have). */
export function probedProfile(overrides: Partial<MachineProfile['host']> = {}): MachineProfile {
  const p = testProfile(overrides);
  for (const s of Object.values(p.shapes)) s.backends['onnxruntime-fp32'] = { ...backend(), decode: PROBE };
  return p;
}
