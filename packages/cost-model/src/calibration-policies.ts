import { layerElements, type ModelShape } from '@flexhelm/offload/plan';
import type { CalibrationRun } from './machine-profile.js';

/** A calibration policy, at the calibration workload unless it says otherwise. */
export type CalibrationCase = CalibrationRun['policy'] & { promptLen?: number };

/**
 * The calibration policies (wg wc · gbs×ngb, 4-bit): one of each kind of schedule the cost model prices — all resident
 * at two batch sizes and a long prompt (the prefill's growth with the prompt and the worker's chunked activations),
 * host-tier and disk-tier weights streamed with one and with two micro-batches, a split placement, and 4-bit
 * weights. The single-micro-batch streamed runs take a longer prompt, so the KV cache and workspace terms are seen
 * at more than one size (short runs peak while loading). The benchmark validates on other policies and another workload (see its README).
 */
export const CALIBRATION_POLICIES: readonly CalibrationCase[] = [
  { wg: 100, wc: 0, gbs: 2, ngb: 1, compress: false },
  { wg: 100, wc: 0, gbs: 8, ngb: 1, compress: false },
  { wg: 100, wc: 0, gbs: 3, ngb: 1, compress: false, promptLen: 256 },
  { wg: 0, wc: 100, gbs: 8, ngb: 1, compress: false, promptLen: 192 },
  { wg: 0, wc: 100, gbs: 2, ngb: 2, compress: false },
  { wg: 0, wc: 0, gbs: 4, ngb: 1, compress: false, promptLen: 192 },
  { wg: 0, wc: 0, gbs: 2, ngb: 2, compress: false },
  { wg: 50, wc: 50, gbs: 4, ngb: 1, compress: false },
  { wg: 0, wc: 100, gbs: 4, ngb: 1, compress: true },
];

/** The calibration workload: short enough for a profile, long enough that a decode step is timed over 7 steps. */
export const CALIBRATION_WORKLOAD = { promptLen: 96, genLen: 8 } as const;


/**
 * Decoder layers of the calibration model: the model's own up to 12 (the per-layer terms then carry over to any
 * depth), 4 for shapes whose layers exceed 200 MB so a run stays a few seconds and within RAM.
 */
export function calibrationLayers(shape: ModelShape): number {
  return Math.min(shape.numLayers, 4 * layerElements(shape) > 200e6 ? 4 : 12);
}
