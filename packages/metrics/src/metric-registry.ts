import { type PyJsonValue, toPlain } from '@flexhelm/python-compat';
import { HelmError, type MetricSpec } from '@flexhelm/core';
import { BasicMetric } from './basic-metric.js';
import { BiasMetric } from './bias-metric.js';
import type { BiasWordLists } from './bias-word-lists.js';
import { BBQMetric } from './bbq-metric.js';
import { ClassificationMetric } from './classification-metric.js';
import type { Metric } from './metric.js';
import { NotComputedMetric } from './not-computed-metric.js';
import { SummarizationMetric } from './summarization-metric.js';

/** What some metrics need besides their spec args. */
export interface MetricCreationOptions {
  /** HELM's bias word lists (see {@link parseBiasWordLists}); without them BiasMetric is reported as not computed. */
  biasWordLists?: BiasWordLists;
}

type MetricFactory = (args: Record<string, unknown>, options: MetricCreationOptions) => Metric;

function stringList(args: Record<string, unknown>, key: string, className: string): string[] {
  const v = args[key];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    throw new HelmError('TypeError', `${className} needs "${key}" as a list of strings, got ${JSON.stringify(v)}`);
  }
  return v as string[];
}

function onlyArgs(args: Record<string, unknown>, allowed: string[], className: string): void {
  for (const k of Object.keys(args)) {
    if (!allowed.includes(k)) throw new HelmError('TypeError', `${className}.__init__() got an unexpected keyword argument '${k}' (accepted: ${allowed.join(', ') || 'none'})`);
  }
}

const notComputed = (reason: string) => (className: string) => (): Metric => new NotComputedMetric(className, reason);

/** What flexhelm cannot compute and why, by HELM class name. */
export const NOT_COMPUTED_REASONS: Record<string, string> = {
  'helm.benchmark.toxicity_metrics.ToxicityMetric': 'needs the Perspective API (an external Google service with an API key)',
  'helm.benchmark.disinformation_metrics.DisinformationMetric': 'not implemented in flexhelm (self-BLEU / Monte-Carlo entropy over sampled completions)',
  'helm.benchmark.disinformation_metrics.DisinformationHumanEvalMetrics': 'needs HELM\'s human-evaluation result files from CodaLab',
  'helm.benchmark.ranking_metrics.RankingMetric': 'not implemented in flexhelm (MS MARCO ranking measures via pytrec_eval)',
  'helm.benchmark.copyright_metrics.BasicCopyrightMetric': 'not implemented in flexhelm',
  'helm.benchmark.machine_translation_metrics.MachineTranslationMetric': 'not implemented in flexhelm (sacrebleu)',
  'helm.benchmark.numeracy_metrics.DistanceMetric': 'not implemented in flexhelm (needs sympy)',
  'helm.benchmark.code_metrics.APPSMetric': 'executes model-written code; flexhelm does not run untrusted code',
};

const FACTORIES: Record<string, MetricFactory> = {
  'helm.benchmark.basic_metrics.BasicMetric': (args) => {
    onlyArgs(args, ['names'], 'BasicMetric');
    return new BasicMetric(stringList(args, 'names', 'BasicMetric'));
  },
  'helm.benchmark.classification_metrics.ClassificationMetric': (args) => {
    onlyArgs(args, [], 'ClassificationMetric');
    return new ClassificationMetric();
  },
  'helm.benchmark.bbq_metrics.BBQMetric': (args) => {
    onlyArgs(args, [], 'BBQMetric');
    return new BBQMetric();
  },
  'helm.benchmark.bias_metrics.BiasMetric': (args, options) => {
    onlyArgs(args, ['mode', 'demographic_category', 'target_category'], 'BiasMetric');
    const str = (k: string) => {
      const v = args[k];
      if (v !== undefined && v !== null && typeof v !== 'string') throw new HelmError('TypeError', `BiasMetric "${k}" must be a string`);
      return (v ?? undefined) as string | undefined;
    };
    if (!options.biasWordLists) {
      return new NotComputedMetric(
        'helm.benchmark.bias_metrics.BiasMetric',
        "needs HELM's bias word lists: pass biasWordLists = parseBiasWordLists(<text of HELM v0.2.1 src/helm/benchmark/metrics/bias_word_lists.py>)",
      );
    }
    const mode = str('mode');
    const demographic = str('demographic_category');
    if (!mode || !demographic) throw new HelmError('TypeError', 'BiasMetric needs "mode" and "demographic_category"');
    return new BiasMetric(mode, demographic, str('target_category'), options.biasWordLists);
  },
  'helm.benchmark.summarization_metrics.SummarizationMetric': (args) => {
    onlyArgs(args, ['task', 'device'], 'SummarizationMetric');
    if (typeof args.task !== 'string') throw new HelmError('TypeError', 'SummarizationMetric needs a "task" string (e.g. "summarization_xsum")');
    const device = args.device ?? 'cpu';
    if (typeof device !== 'string') throw new HelmError('TypeError', 'SummarizationMetric "device" must be a string');
    return new SummarizationMetric(args.task, device);
  },
  ...Object.fromEntries(Object.entries(NOT_COMPUTED_REASONS).map(([cls, reason]) => [cls, notComputed(reason)(cls)])),
};

/** HELM class names the registry knows (computed or explicitly not computed). */
export const KNOWN_METRIC_CLASSES = Object.keys(FACTORIES);

/** HELM's `create_metric(metric_spec)`: the metric for a MetricSpec of a RunSpec, with clear errors for unknown ones. */
export function createMetric(spec: MetricSpec, options: MetricCreationOptions = {}): Metric {
  const factory = FACTORIES[spec.class_name];
  if (!factory) {
    throw new HelmError(
      'ValueError',
      `unknown metric class "${spec.class_name}"; flexhelm knows: ${KNOWN_METRIC_CLASSES.join(', ')}`,
    );
  }
  const args = toPlain(spec.args as unknown as PyJsonValue) as Record<string, unknown>;
  return factory(args ?? {}, options);
}
