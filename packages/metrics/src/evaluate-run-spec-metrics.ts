import type { MetricSpec, PerInstanceStats, ScenarioState, Stat, WindowService } from '@flexhelm/core';
import type { Metric, MetricServices } from './metric.js';
import { createMetric, type MetricCreationOptions } from './metric-registry.js';
import { NotComputedMetric } from './not-computed-metric.js';
import { SummarizationMetric } from './summarization-metric.js';
import { TokensMetric } from './tokens-metric.js';

export interface EvaluateOptions extends MetricServices, MetricCreationOptions {
  windowService?: WindowService;
  /** Skip the metric specs and compute only TokensMetric (HELM's `--dry-run`). */
  dryRun?: boolean;
}

/** A metric (or some of its stats) the run names but flexhelm did not compute. */
export interface NotComputed {
  metric: string;
  stats?: string[];
  reason: string;
}

export interface RunMetricsResult {
  /** stats.json: every metric's aggregated stats in metric order (HELM's runner concatenation). */
  stats: Stat[];
  /** per_instance_stats.json. */
  perInstanceStats: PerInstanceStats[];
  notComputed: NotComputed[];
}

/**
 * What HELM's runner does after execution: create every metric of `metricSpecs` (not only the first, as
 * FlexLLMGen does), append `TokensMetric`, evaluate each on the scenario state and concatenate the results.
 */
export function evaluateRunSpecMetrics(metricSpecs: MetricSpec[], scenarioState: ScenarioState, options: EvaluateOptions = {}): RunMetricsResult {
  const metrics: Metric[] = [...(options.dryRun ? [] : metricSpecs.map((spec) => createMetric(spec, options))), new TokensMetric()];
  const stats: Stat[] = [];
  const perInstanceStats: PerInstanceStats[] = [];
  const notComputed: NotComputed[] = [];
  for (const metric of metrics) {
    if (metric instanceof NotComputedMetric) notComputed.push({ metric: metric.className, reason: metric.reason });
    if (metric instanceof SummarizationMetric) {
      notComputed.push({ metric: metric.className, stats: metric.notComputed, reason: 'needs CodaLab human-evaluation/QAFactEval caches or neural models' });
    }
    const result = metric.evaluate(scenarioState, options);
    stats.push(...result.aggregatedStats);
    perInstanceStats.push(...result.perInstanceStats);
  }
  return { stats, perInstanceStats, notComputed };
}
