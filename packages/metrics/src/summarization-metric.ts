import { pyFloat, pyStrip, toNumber } from '@flexhelm/python-compat';
import { metricName, type AdapterSpec, type RequestState, type Stat } from '@flexhelm/core';
import { dataStats } from './data-stats.js';
import { Metric, type MetricServices } from './metric.js';

import { rougeFunction } from './rouge.js';
import { statOf } from './stat.js';

function removeBraces(text: string): string {
  let t = text;
  if (t.startsWith('{')) t = t.slice(1);
  if (t.endsWith('}')) t = t.slice(0, -1);
  return t;
}

/**
 * HELM 0.2.1's `SummarizationMetric(task, device)` for what runs without neural models or downloads: `rouge_1`,
 * `rouge_2`, `rouge_l` (max over references) and `summarization_coverage/density/compression`.
 * Not computed, by design: `HumanEval-*` and `QAFactEval` (HELM looks them up in CodaLab score caches for the
 * models HELM evaluated), `summac` and `BERTScore-*` (neural models, only when device != cpu). They are listed in
 * {@link SummarizationMetric.notComputed} so a caller can report them.
 */
export class SummarizationMetric extends Metric {
  readonly className = 'helm.benchmark.summarization_metrics.SummarizationMetric';
  readonly notComputed: string[];

  constructor(
    readonly task: string,
    readonly device = 'cpu',
  ) {
    super();
    this.notComputed = ['HumanEval-faithfulness', 'HumanEval-relevance', 'HumanEval-coherence', 'QAFactEval'];
    if (device !== 'cpu') this.notComputed.push('summac', 'BERTScore-P', 'BERTScore-R', 'BERTScore-F');
  }

  override evaluateGeneration(_adapterSpec: AdapterSpec, rs: RequestState, _services: MetricServices): Stat[] {
    const refs = rs.instance.references.map((r) => removeBraces(r.output.text));
    const input = removeBraces(rs.instance.input.text);
    if (!rs.result || rs.result.completions.length === 0) throw new Error(`request of instance ${rs.instance.id} has no completion`);
    const pred = removeBraces(pyStrip(rs.result.completions[0]!.text));
    if (refs.length === 0) throw new Error(`instance ${rs.instance.id} has no references to score the summary against (HELM's np.max of an empty list fails too)`);
    const stats: Stat[] = [];
    for (const [name, type] of [
      ['rouge_1', 'rouge1'],
      ['rouge_2', 'rouge2'],
      ['rouge_l', 'rougeL'],
    ] as const) {
      const fn = rougeFunction(type);
      const best = Math.max(...refs.map((ref) => toNumber(fn(ref, pred))));
      stats.push(statOf(metricName(name), pyFloat(best)));
    }
    const ds = dataStats(pred, input);
    stats.push(
      statOf(metricName('summarization_coverage'), pyFloat(ds.coverage)),
      statOf(metricName('summarization_density'), pyFloat(ds.density)),
      statOf(metricName('summarization_compression'), pyFloat(ds.compression)),
    );
    return stats;
  }
}
