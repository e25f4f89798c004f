import { tmpdir } from 'node:os';
import type { ModelDescription } from '@flexhelm/engine';
import { modelShapeOfDescription, planMemory, type ModelShape } from '@flexhelm/offload';
import { CALIBRATION_POLICIES, CALIBRATION_WORKLOAD, calibrationLayers, calibrationPolicy, fitCost, predictPeakRss, shapeId, type CalibrationRun, type ComputePath, type MachineProfile } from '@flexhelm/cost-model';
import { availableRam, scaleHeadCosts } from './profile-machine.js';
import { profileDescription, toShapeKey } from './profiled-model.js';
import { runPolicy } from './run-policy.js';

export interface CalibrateOptions {
  /** Folder for the disk-tier policy (without one it is left out). */
  offloadDir?: string;
  backend?: ComputePath;
  log?: (line: string) => void;
}

/**
 * Times the calibration policies on `config`'s shape (dummy weights, each in its own process, FlexLLMGen's loop as the
 * benchmark runs it). A policy the unfitted model predicts to need more than half the free RAM is skipped.
 */
export function calibrationRuns(d: ModelDescription, shape: ModelShape, profile: MachineProfile, options: CalibrateOptions = {}): CalibrationRun[] {
  const layers = calibrationLayers(shape);
  const s = { ...shape, numLayers: layers };
  const runs: CalibrationRun[] = [];
  const free = availableRam();
  for (const { promptLen, ...p } of CALIBRATION_POLICIES) {
    const policy = calibrationPolicy(p);
    const workload = { promptLen: Math.min(promptLen ?? CALIBRATION_WORKLOAD.promptLen, shape.maxPositions - CALIBRATION_WORKLOAD.genLen), genLen: CALIBRATION_WORKLOAD.genLen };
    if (p.wg + p.wc < 100 && !options.offloadDir) continue;
    const peak = predictPeakRss(s, policy, planMemory(s, policy, workload), profile.host.baseRssBytes, undefined, workload);
    if (peak > free / 2) {
      options.log?.(`profile: calibration ${p.wg} ${p.wc} · ${p.gbs}×${p.ngb} skipped (predicted ${(peak / 2 ** 30).toFixed(1)} GiB, ${(free / 2 ** 30).toFixed(1)} GiB free)`);
      continue;
    }
    options.log?.(`profile: calibration run ${p.wg} ${p.wc} · ${p.gbs}×${p.ngb}${p.compress ? ' · 4-bit' : ''}, prompt ${workload.promptLen} (${layers} layers)…`);
    const m = runPolicy({ description: d, policy, ...workload, offloadDir: options.offloadDir ?? tmpdir(), layers, backend: options.backend });
    runs.push({ policy: p, layers, ...workload, prefillMs: m.prefillMs, decodeStepMs: m.decodeStepMs, peakRssBytes: m.peakRssBytes });
  }
  return runs;
}

/**
 * Fits the cost model of every profiled backend at the model's shape (in place): calibration runs measured now, or —
 * `reuseRuns`, after only the host figures changed — the runs already stored, fitted again against the new figures.
 * The runs use the profile's dummy models (the model's family, its table cut to `profileVocab`), and are fitted
 * against the figures at that vocabulary; the scales carry over to the model's own.
 */
export function calibrateShape(full: ModelDescription, profile: MachineProfile, options: CalibrateOptions & { reuseRuns?: boolean } = {}): void {
  const entry = profile.shapes[shapeId(toShapeKey(full))];
  if (!entry) throw new Error(`calibrateShape: the profile has no figures for ${full.name}'s shapes`);
  const d = profileDescription(full, full.layers);
  const shape = modelShapeOfDescription(d);
  for (const [name, b] of Object.entries(entry.backends)) {
    const backend = name as ComputePath;
    const runs = options.reuseRuns && b.fit ? b.fit.runs : calibrationRuns(d, shape, profile, { ...options, backend });
    if (runs.length === 0) continue;
    // The unfitted model is what the runs are fitted against, with head costs at the runs' vocabulary.
    const { fit: _old, ...unfitted } = b;
    const atRuns = scaleHeadCosts(unfitted, full.vocabSize, d.vocabSize);
    const asRun: MachineProfile = { ...profile, shapes: { [shapeId(toShapeKey(d))]: { shape: toShapeKey(d), backends: { [name]: atRuns } } } };
    b.fit = fitCost(shape, runs, asRun, backend);
    options.log?.(`profile: ${name} fitted to ${runs.length} runs (rms error: time ${(100 * b.fit.rmsLogError.time).toFixed(0)}%, memory ${(100 * b.fit.rmsLogError.memory).toFixed(0)}%)`);
  }
}
