import { metricName, type PerInstanceStats, type Request, type ScenarioState } from '@flexhelm/core';
import { Metric, type MetricResult, type MetricServices } from './metric.js';
import { StatTable, statOf } from './stat.js';

/** GooseAI's price includes the first 25 generated tokens. */
const GOOSEAI_BASE_PRICE_TOKENS = 25;

/**
 * HELM 0.2.1's `AutoTokenCostEstimator`: by the model's organization (the part before `/`). OpenAI counts prompt
 * (twice when echoed) plus completions, AI21 and Cohere the completions, GooseAI completions (plus an echoed
 * prompt) beyond 25, everyone else (together/*, local OPT) is free: 0.
 */
export function estimateNumTokensCost(request: Request, services: MetricServices): number {
  const organization = request.model.split('/')[0];
  const completions = request.num_completions * request.max_tokens;
  const promptTokens = () => {
    if (!services.windowService) throw new Error(`estimating the token cost of ${request.model} needs a window service`);
    return services.windowService.getNumTokens(request.prompt);
  };
  switch (organization) {
    case 'openai': {
      const n = promptTokens();
      return n + completions + (request.echo_prompt ? n : 0);
    }
    case 'ai21':
    case 'cohere':
      return completions;
    case 'gooseai':
      return Math.max(completions + (request.echo_prompt ? promptTokens() : 0) - GOOSEAI_BASE_PRICE_TOKENS, 0);
    default:
      return 0;
  }
}

/**
 * HELM's `TokensMetric` (the runner appends it to every run): per request state `estimated_num_tokens_cost`,
 * `num_completions`, `max_num_output_tokens`; aggregated as plain sums (no contexts, no per-trial means) plus
 * `num_requests`.
 */
export class TokensMetric extends Metric {
  readonly className = 'helm.benchmark.tokens_metric.TokensMetric';

  override evaluate(state: ScenarioState, services: MetricServices = {}): MetricResult {
    const perInstanceStats: PerInstanceStats[] = [];
    const table = new StatTable();
    for (const rs of state.request_states) {
      const stats = [
        statOf(metricName('estimated_num_tokens_cost'), estimateNumTokensCost(rs.request, services)),
        statOf(metricName('num_completions'), rs.request.num_completions),
        statOf(metricName('max_num_output_tokens'), rs.request.num_completions * rs.request.max_tokens),
      ];
      if (rs.instance.id === undefined) throw new Error('every instance needs an id (HELM assigns id0, id1, … with with_instance_ids)');
      perInstanceStats.push({ instance_id: rs.instance.id, perturbation: rs.instance.perturbation, train_trial_index: rs.train_trial_index, stats });
      for (const s of stats) table.merge(s);
    }
    table.merge(statOf(metricName('num_requests'), state.request_states.length));
    return { aggregatedStats: table.values(), perInstanceStats };
  }
}
