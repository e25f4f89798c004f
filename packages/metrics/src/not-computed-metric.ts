import type { ScenarioState } from '@flexhelm/core';
import { Metric, type MetricResult } from './metric.js';

/**
 * A metric a run spec names that flexhelm does not compute, with the reason. It produces no stats (never made-up
 * ones); {@link evaluateRunSpecMetrics} lists it under `notComputed` so reports can say what is missing.
 */
export class NotComputedMetric extends Metric {
  constructor(
    readonly className: string,
    readonly reason: string,
  ) {
    super();
  }

  override evaluate(_state: ScenarioState): MetricResult {
    return { aggregatedStats: [], perInstanceStats: [] };
  }
}
