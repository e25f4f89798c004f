import { objectSpec, type ArgValue, type MetricSpec } from '@flexhelm/core';
import { ADAPT_RANKING_BINARY } from './adapter-spec-builders.js';

/** HELM 0.2.1's metric-spec bundles (`get_*_metric_specs` in `run_specs.py`). */
const metric = (moduleAndClass: string, args: Record<string, ArgValue> = {}): MetricSpec =>
  objectSpec(`helm.benchmark.${moduleAndClass}`, args);

export const basicMetricSpecs = (names: string[]): MetricSpec[] => [metric('basic_metrics.BasicMetric', { names })];

export const exactMatchMetricSpecs = () =>
  basicMetricSpecs(['exact_match', 'quasi_exact_match', 'prefix_exact_match', 'quasi_prefix_exact_match']);

export const f1MetricSpecs = () => basicMetricSpecs(['exact_match', 'quasi_exact_match', 'f1_score']);

export const classificationMetricSpecs = () => [metric('classification_metrics.ClassificationMetric')];

export const bbqMetricSpecs = () => [metric('bbq_metrics.BBQMetric'), ...exactMatchMetricSpecs()];

const MSMARCO_MEASURES = (() => {
  const at = (name: string, ks: number[]) => ks.map((k) => `${name}.${k}`);
  const success = at('success', [1, 2, 3, 5, 10, 20]);
  const recall = at('recall', [1, 2, 3, 5, 10, 20]);
  const recipRank = at('recip_rank', [5, 10, 20]);
  const ndcgCut = at('ndcg_cut', [5, 10, 20]);
  return new Map([
    ['regular', { measures: [...success, ...recall, ...recipRank], goldRelations: [1] }],
    ['trec', { measures: [...success, ...recall, ...recipRank, ...ndcgCut], goldRelations: [2, 3] }],
  ]);
})();

/** The MS MARCO tracks (`MSMARCOScenario.TRACK_NAMES`). */
export const MSMARCO_TRACKS = [...MSMARCO_MEASURES.keys()];

export function msmarcoMetricSpecs(track: ArgValue, rank: number | null): MetricSpec[] | undefined {
  const info = typeof track === 'string' ? MSMARCO_MEASURES.get(track) : undefined;
  if (!info) return undefined;
  const multipleRelevanceValues = !(info.goldRelations.length === 1 && info.goldRelations[0] === 1);
  return [
    metric('ranking_metrics.RankingMetric', {
      method: ADAPT_RANKING_BINARY,
      measure_names: info.measures,
      correct_output: 'Yes',
      wrong_output: 'No',
      rank,
      multiple_relevance_values: multipleRelevanceValues,
    }),
    ...basicMetricSpecs([]),
  ];
}

const toxicityMetricSpecs = () => [metric('toxicity_metrics.ToxicityMetric')];

function biasMetricSpecs(): MetricSpec[] {
  const demographics = ['race', 'gender'];
  const targets = ['adjective', 'profession'];
  return [
    ...demographics.flatMap((dem) =>
      targets.map((tgt) => metric('bias_metrics.BiasMetric', { mode: 'associations', demographic_category: dem, target_category: tgt })),
    ),
    ...demographics.map((dem) => metric('bias_metrics.BiasMetric', { mode: 'representation', demographic_category: dem })),
  ];
}

export const generativeHarmsMetricSpecs = (includeBasicMetrics = false): MetricSpec[] => [
  ...biasMetricSpecs(),
  ...toxicityMetricSpecs(),
  ...(includeBasicMetrics ? basicMetricSpecs([]) : []),
];

export const summarizationMetricSpecs = (args: Record<string, ArgValue>) => [
  metric('summarization_metrics.SummarizationMetric', args),
  ...basicMetricSpecs([]),
];

export const srnMetricSpecs = () => basicMetricSpecs(['f1_set_match', 'iou_set_match', 'exact_set_match']);

export function numeracyMetricSpecs(runSolver: boolean): MetricSpec[] {
  const specs = basicMetricSpecs(['exact_match', 'quasi_exact_match', 'absolute_value_difference']);
  return runSolver ? [...specs, metric('numeracy_metrics.DistanceMetric')] : specs;
}

export const mathMetricSpecs = (useChainOfThought: boolean) =>
  basicMetricSpecs([useChainOfThought ? 'math_equiv_chain_of_thought' : 'math_equiv']);

export function copyrightMetricSpecs(args: Record<string, ArgValue>): MetricSpec[] {
  return [
    ...['longest_common_prefix_length', 'edit_distance', 'edit_similarity'].map((name) =>
      metric('copyright_metrics.BasicCopyrightMetric', { ...args, name }),
    ),
    ...basicMetricSpecs([]),
  ];
}

export function disinformationMetricSpecs(args: Record<string, ArgValue>): MetricSpec[] {
  return [
    metric('disinformation_metrics.DisinformationHumanEvalMetrics', { ...args }),
    metric('disinformation_metrics.DisinformationMetric', { name: 'self_bleu' }),
    metric('disinformation_metrics.DisinformationMetric', { name: 'monte_carlo_entropy' }),
    ...basicMetricSpecs([]),
  ];
}

export function codeMetricSpecs(dataset: ArgValue, timeout: ArgValue): MetricSpec[] {
  if (dataset === 'humaneval') return basicMetricSpecs(['code_eval_acc', 'pass']);
  return [metric('code_metrics.APPSMetric', { names: ['test_avg', 'strict_acc'], timeout })];
}

export const openEndedGenerationMetricSpecs = () =>
  basicMetricSpecs(['exact_match', 'quasi_exact_match', 'f1_score', 'rouge_l', 'bleu_1', 'bleu_4']);

export const machineTranslationMetricSpecs = () => [
  metric('machine_translation_metrics.MachineTranslationMetric'),
  ...basicMetricSpecs([]),
];
