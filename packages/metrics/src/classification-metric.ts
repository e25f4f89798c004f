import { npMean, pyFloat } from '@flexhelm/python-compat';
import { HelmError, isCorrect, metricName, type RequestState, type Stat } from '@flexhelm/core';
import { Metric } from './metric.js';
import { normalizeText } from './normalize-text.js';
import { statOf } from './stat.js';

/** sklearn 1.1's F-score from precision and recall (0 where undefined). */
function fScore(precision: number, recall: number): number {
  const denom = precision + recall;
  return denom === 0 ? 0 : (2 * precision * recall) / denom;
}

const divide = (num: number, den: number) => (den === 0 ? 0 : num / den);

/**
 * sklearn's `f1_score(y_true, y_pred, labels, average)` for single-label classification: per-label precision and
 * recall over the given labels only (a prediction outside them is no one's false positive), macro = mean of the
 * per-label F1, micro = F1 of the pooled counts.
 */
export function f1ScoreSklearn(yTrue: string[], yPred: string[], labels: string[], average: 'macro' | 'micro'): number {
  const tp = labels.map((l) => yTrue.filter((t, i) => t === l && yPred[i] === l).length);
  const predicted = labels.map((l) => yPred.filter((p) => p === l).length);
  const actual = labels.map((l) => yTrue.filter((t) => t === l).length);
  if (average === 'micro') {
    const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
    return fScore(divide(sum(tp), sum(predicted)), divide(sum(tp), sum(actual)));
  }
  if (labels.length === 0) return 0;
  return npMean(labels.map((_, i) => fScore(divide(tp[i]!, predicted[i]!), divide(tp[i]!, actual[i]!))));
}

/**
 * HELM 0.2.1's `ClassificationMetric`: population-level `classification_macro_f1` / `classification_micro_f1` of the
 * normalized first completion against the normalized single correct reference, over each context's requests.
 * HELM builds the label list from a Python set (hash order); flexhelm sorts it, which changes nothing but the
 * last bit of the macro average's summation order.
 */
export class ClassificationMetric extends Metric {
  readonly className = 'helm.benchmark.classification_metrics.ClassificationMetric';

  override evaluateInstances(requestStates: RequestState[]): Stat[] {
    const yTrue: string[] = [];
    const yPred: string[] = [];
    for (const rs of requestStates) {
      if (rs.reference_index !== undefined) throw new HelmError('ValueError', 'ClassificationMetric does not support multiple choice separate adapters');
      if (rs.request_mode === 'calibration') throw new HelmError('ValueError', 'ClassificationMetric does not support calibration requests');
      if (!rs.result) throw new HelmError('AssertionError', `request of instance ${rs.instance.id} has no result`);
      if (rs.result.completions.length !== 1) throw new HelmError('ValueError', 'Result must contain exactly one completion');
      const correct = rs.instance.references.filter(isCorrect);
      for (const r of correct) yTrue.push(normalizeText(r.output.text));
      if (correct.length !== 1) throw new HelmError('ValueError', 'ClassificationMetric does not support multi-label classification');
      if (rs.output_mapping && Object.keys(rs.output_mapping).length > 0) throw new HelmError('ValueError', 'ClassificationMetric does not support multiple choice adapters');
      yPred.push(normalizeText(rs.result.completions[0]!.text));
    }
    const labels = [...new Set(yTrue)].sort();
    return [
      statOf(metricName('classification_macro_f1'), pyFloat(f1ScoreSklearn(yTrue, yPred, labels, 'macro'))),
      statOf(metricName('classification_micro_f1'), pyFloat(f1ScoreSklearn(yTrue, yPred, labels, 'micro'))),
    ];
  }
}
