import { glibcLog, glibcPow, npExp, npSum, pyFloat, pyMax, type PyNumber, pyStrip, toNumber } from '@flexhelm/python-compat';
import { HelmError, isCorrect, metricName, type AdapterSpec, type Instance, type MetricName, type RequestState, type Sequence, type Stat, type Token, type WindowService } from '@flexhelm/core';
import { bleu1, bleu4 } from './bleu.js';
import { eceEqualMass, eceEqualWidth, plattScaler, selectiveStats } from './calibration.js';
import { INFERENCE_DENOISED_RUNTIMES, INFERENCE_IDEALIZED_RUNTIMES, TRAINING_CO2_COST, TRAINING_ENERGY_COST, type InferenceRuntimeModel } from './efficiency-data.js';
import { mathEquiv, mathEquivChainOfThought } from './math-equiv.js';
import { Metric, uniqueStatByName, type MetricServices } from './metric.js';
import { withName } from './metric-name-key.js';

import { rougeFunction } from './rouge.js';
import {
  absoluteValueDifference,
  exactMatch,
  exactMatchIndicator,
  exactSetMatch,
  f1Score,
  f1SetMatch,
  iouSetMatch,
  prefixExactMatch,
  quasiExactMatch,
  quasiPrefixExactMatch,
  requireText,
  type Prediction,
} from './score-functions.js';
import { statOf } from './stat.js';

type ReferenceScore = (gold: string, pred: Prediction) => PyNumber;

/** BasicMetric's `metric_fn_mapping` (HELM 0.2.1), minus the code metrics that execute model output. */
export const REFERENCE_METRIC_FUNCTIONS: Record<string, ReferenceScore> = {
  exact_match: exactMatch,
  quasi_exact_match: quasiExactMatch,
  prefix_exact_match: prefixExactMatch,
  quasi_prefix_exact_match: quasiPrefixExactMatch,
  exact_match_indicator: (g, p) => exactMatchIndicator(g, p),
  exact_set_match: exactSetMatch,
  iou_set_match: iouSetMatch,
  f1_set_match: f1SetMatch,
  math_equiv: (g, p) => mathEquiv(g, p),
  math_equiv_chain_of_thought: (g, p) => mathEquivChainOfThought(g, requireText(p, 'math_equiv_chain_of_thought')),
  f1_score: f1Score,
  rouge_1: (g, p) => rougeFunction('rouge1')(g, requireText(p, 'rouge_1')),
  rouge_2: (g, p) => rougeFunction('rouge2')(g, requireText(p, 'rouge_2')),
  rouge_l: (g, p) => rougeFunction('rougeL')(g, requireText(p, 'rouge_l')),
  bleu_1: (g, p) => bleu1(g, requireText(p, 'bleu_1')),
  bleu_4: (g, p) => bleu4(g, requireText(p, 'bleu_4')),
  absolute_value_difference: absoluteValueDifference,
};

/** Names HELM knows but flexhelm refuses to compute: they run model-written Python code. */
export const CODE_EXECUTION_METRICS = ['code_eval_acc', 'pass'];

const FINISH_REASONS = ['length', 'stop', 'endoftext', 'unknown'] as const;

/** A float read back from JSON may be a boxed PyFloat (`0.0`); arithmetic needs the plain value. */
function num(x: number | PyNumber): number {
  return toNumber(x);
}

/** Python's `max(iterable)`: the first of equal maxima wins (which keeps its int/float type). */
function pyMaxOf(values: PyNumber[]): PyNumber {
  return values.reduce((best, v) => pyMax(best, v));
}

/** Σ of float logprobs as Python's `sum()` does it (int 0 when empty). */
function sumLogprobs(tokens: Token[]): PyNumber {
  if (tokens.length === 0) return 0;
  let s = 0;
  for (const t of tokens) s += num(t.logprob);
  return pyFloat(s);
}

/** `get_num_bytes`: `bytes:` tokens count their `\x` escapes, other tokens their UTF-8 length. */
export function numBytesOfTokens(tokens: Token[]): number {
  let n = 0;
  for (const t of tokens) n += t.text.startsWith('bytes:') ? t.text.split('\\x').length - 1 : Buffer.byteLength(t.text, 'utf8');
  return n;
}

function estimatedRuntime(model: InferenceRuntimeModel | undefined, numPromptTokens: number, numOutputTokens: number): PyNumber | undefined {
  if (!model) return undefined;
  const sorted = [...model.promptTokens].sort((a, b) => a[0] - b[0]);
  let runtime: number | undefined;
  for (const [key, seconds] of sorted) {
    if (numPromptTokens <= key) {
      runtime = seconds * (numPromptTokens / key);
      break;
    }
  }
  if (runtime === undefined) {
    const [largest, seconds] = sorted.at(-1)!;
    runtime = seconds * (numPromptTokens / largest);
  }
  if (numOutputTokens > 0) runtime += model.perOutputToken * (numOutputTokens - 1);
  if (model.overhead !== undefined) runtime += model.overhead;
  return pyFloat(runtime);
}

function requireWindow(services: MetricServices, what: string): WindowService {
  if (!services.windowService) {
    throw new HelmError('ValueError', `${what} needs the model's window service (tokenizer): pass { windowService } to evaluateRunSpecMetrics / Metric.evaluate`);
  }
  return services.windowService;
}

function requireResult(rs: RequestState) {
  if (!rs.result) throw new HelmError('AssertionError', `request state of instance ${rs.instance.id} has no result: execute the requests before computing metrics`);
  return rs.result;
}

/**
 * HELM 0.2.1's `BasicMetric(names)`: general, efficiency, finish-reason and truncation stats for every request,
 * the configured reference metrics (max over correct references, `name@k` over all completions), multiple-choice
 * scoring of separate/calibrated requests, language-modeling sums, perplexity-type derived stats and calibration.
 */
export class BasicMetric extends Metric {
  readonly className = 'helm.benchmark.basic_metrics.BasicMetric';

  constructor(readonly names: string[]) {
    super();
    for (const name of names) {
      if (CODE_EXECUTION_METRICS.includes(name)) {
        throw new HelmError('NotImplementedError', `BasicMetric "${name}" executes model-written code (HumanEval); flexhelm does not run untrusted code — drop it from the metric names`);
      }
      if (!Object.hasOwn(REFERENCE_METRIC_FUNCTIONS, name)) {
        throw new HelmError('Exception', `NameError: ${name} is not in the list of metric functions. Known: ${Object.keys(REFERENCE_METRIC_FUNCTIONS).join(', ')}`);
      }
    }
  }

  computeReferenceMetrics(adapterSpec: AdapterSpec, rs: RequestState): Stat[] {
    const golds = rs.instance.references.filter(isCorrect);
    if (golds.length === 0) throw new HelmError('AssertionError', `instance ${rs.instance.id} has references but none is tagged correct`);
    const result = requireResult(rs);
    if (result.completions.length === 0) throw new HelmError('AssertionError', `request of instance ${rs.instance.id} has no completions`);
    // Python's sort is stable, like Array.prototype.sort.
    const sorted: Sequence[] = [...result.completions].sort((a, b) => num(b.logprob) - num(a.logprob));
    let preds: Prediction[] = sorted.map((c) => pyStrip(c.text));
    const mapping = rs.output_mapping;
    if (mapping) preds = preds.map((p) => (p !== null && Object.hasOwn(mapping, p) ? mapping[p]! : null));

    const stats: Stat[] = [statOf(metricName('max_prob'), pyFloat(npExp(num(sorted[0]!.logprob))))];
    for (const name of this.names) {
      const fn = REFERENCE_METRIC_FUNCTIONS[name]!; // names checked in the constructor
      const score1 = pyMaxOf(golds.map((g) => fn(g.output.text, preds[0]!)));
      const scoreK = pyMaxOf(golds.flatMap((g) => preds.map((p) => fn(g.output.text, p))));
      const mn = metricName(name);
      stats.push(statOf(mn, score1));
      if (adapterSpec.num_outputs !== 1) stats.push(statOf(withName(mn, { name: `${name}@${adapterSpec.num_outputs}` }), scoreK));
    }
    return stats;
  }

  computeEfficiencyMetrics(_adapterSpec: AdapterSpec, rs: RequestState, services: MetricServices): Stat[] {
    const result = requireResult(rs);
    if (result.request_time === undefined || result.request_time === null) {
      throw new HelmError('AssertionError', `request of instance ${rs.instance.id} has no request_time; executors must record it (seconds)`);
    }
    // HELM's request times are floats (time.time() differences), even when integral.
    let runtime: PyNumber = pyFloat(num(result.request_time));
    let batchSize = 1;
    if (result.batch_request_time !== undefined && result.batch_request_time !== null && result.batch_size !== undefined && result.batch_size !== null) {
      runtime = pyFloat(num(result.batch_request_time));
      batchSize = result.batch_size;
    }
    const numPromptTokens = requireWindow(services, 'BasicMetric').getNumTokens(rs.request.prompt);
    const numCompletionTokens = result.completions.reduce((n, c) => n + c.tokens.length, 0);
    let numOutputTokens = numCompletionTokens;
    if (rs.request.echo_prompt) numOutputTokens = numPromptTokens <= numOutputTokens ? numOutputTokens - numPromptTokens : 0;

    const model = rs.request.model;
    const idealized = estimatedRuntime(INFERENCE_IDEALIZED_RUNTIMES[model], numPromptTokens, numOutputTokens);
    let denoised = estimatedRuntime(INFERENCE_DENOISED_RUNTIMES[model], numPromptTokens, numOutputTokens);
    if (result.batch_size !== undefined && result.batch_size !== null) denoised = pyFloat(toNumber(runtime) / result.batch_size);
    const co2 = Object.hasOwn(TRAINING_CO2_COST, model) ? pyFloat(TRAINING_CO2_COST[model]!) : undefined;
    const energy = Object.hasOwn(TRAINING_ENERGY_COST, model) ? pyFloat(TRAINING_ENERGY_COST[model]!) : undefined;

    const stats = [
      statOf(metricName('num_prompt_tokens'), numPromptTokens),
      statOf(metricName('num_completion_tokens'), numCompletionTokens),
      statOf(metricName('num_output_tokens'), numOutputTokens),
      statOf(metricName('inference_runtime'), runtime),
      statOf(metricName('batch_size'), batchSize),
      statOf(metricName('training_co2_cost'), co2),
      statOf(metricName('training_energy_cost'), energy),
    ];
    if (denoised !== undefined) stats.push(statOf(metricName('inference_denoised_runtime'), denoised));
    if (idealized !== undefined) stats.push(statOf(metricName('inference_idealized_runtime'), idealized));
    return stats;
  }

  computeFinishReasonMetrics(rs: RequestState): Stat[] {
    const sequence = requireResult(rs).completions[0];
    const given = sequence?.finish_reason?.reason;
    const reason = given !== undefined && (FINISH_REASONS as readonly string[]).includes(given) ? given : 'unknown';
    return FINISH_REASONS.map((r) => statOf(metricName(`finish_reason_${r}`), reason === r ? 1 : 0));
  }

  computeTruncationMetrics(rs: RequestState): Stat[] {
    return [statOf(metricName('num_train_instances'), rs.num_train_instances), statOf(metricName('prompt_truncated'), rs.prompt_truncated)];
  }

  computeAllGeneralMetrics(adapterSpec: AdapterSpec, rs: RequestState, services: MetricServices): Stat[] {
    return [
      statOf(metricName('num_references'), rs.instance.references.length),
      statOf(metricName('num_train_trials'), adapterSpec.num_train_trials),
      ...this.computeEfficiencyMetrics(adapterSpec, rs, services),
      ...this.computeFinishReasonMetrics(rs),
      ...this.computeTruncationMetrics(rs),
    ];
  }

  computeLanguageModelingMetrics(rs: RequestState): Stat[] {
    const sequence = requireResult(rs).completions[0];
    if (!sequence) throw new HelmError('AssertionError', `request of instance ${rs.instance.id} has no completions`);
    // AI21-style empty first token introduced by chunking is not part of the text.
    const tokens = rs.num_conditioning_tokens > 0 && sequence.tokens[0]?.text === '' ? sequence.tokens.slice(1) : sequence.tokens;
    const predTokens = tokens.slice(rs.num_conditioning_tokens);
    return [
      statOf(metricName('logprob'), sumLogprobs(predTokens)),
      statOf(metricName('num_perplexity_tokens'), predTokens.length),
      statOf(metricName('num_bytes'), numBytesOfTokens(predTokens)),
    ];
  }

  override evaluateGeneration(adapterSpec: AdapterSpec, rs: RequestState, services: MetricServices): Stat[] {
    const stats = this.computeAllGeneralMetrics(adapterSpec, rs, services);
    if (rs.instance.references.length > 0) stats.push(...this.computeReferenceMetrics(adapterSpec, rs));
    stats.push(...this.computeLanguageModelingMetrics(rs));
    return stats;
  }

  override evaluateReferences(adapterSpec: AdapterSpec, referenceStates: RequestState[], services: MetricServices): Stat[] {
    const first = referenceStates[0];
    if (!first) throw new HelmError('AssertionError', 'evaluateReferences needs the request states of at least one reference');
    const references = first.instance.references;
    const window = requireWindow(services, 'BasicMetric (multiple-choice separate/calibrated scoring)');
    const answers = references.flatMap((r, i) => (isCorrect(r) ? [i] : []));
    const referenceStats = new Map<string, { logprob: number; numTokens: number }>();
    for (const rs of referenceStates) {
      if (rs.instance.references !== references && JSON.stringify(rs.instance.references) !== JSON.stringify(references)) {
        throw new HelmError('AssertionError', 'reference request states of one instance disagree on its references');
      }
      if (rs.reference_index === undefined || rs.request_mode === undefined) {
        throw new HelmError('AssertionError', 'reference request states need reference_index and request_mode');
      }
      const result = requireResult(rs);
      if (result.completions.length !== 1) throw new HelmError('AssertionError', `reference request of instance ${rs.instance.id} must have exactly one completion`);
      const reference = references[rs.reference_index];
      if (!reference) throw new HelmError('IndexError', `list index out of range: reference_index ${rs.reference_index} of instance ${rs.instance.id}, which has ${references.length} references`);
      const text = reference.output.text;
      const numTokens = window.tokenize(` ${text}`).length;
      const tokens = result.completions[0]!.tokens;
      const answerTokens = numTokens === 0 ? tokens : tokens.slice(Math.max(0, tokens.length - numTokens));
      let logprob = 0;
      for (const t of answerTokens) logprob += num(t.logprob);
      if (Number.isNaN(logprob)) throw new HelmError('AssertionError', `log probs have NaN for the request state of instance ${rs.instance.id}`);
      referenceStats.set(`${rs.reference_index}/${rs.request_mode}`, { logprob, numTokens });
    }
    const get = (i: number, mode: string) => {
      const s = referenceStats.get(`${i}/${mode}`);
      if (!s) throw new HelmError('KeyError', `no ${mode} request for reference ${i} of instance ${references === undefined ? '?' : first.instance.id}`);
      return s;
    };
    let scores: number[];
    if (adapterSpec.method === 'multiple_choice_separate_original' || adapterSpec.method === 'ranking_binary') {
      scores = references.map((_, i) => get(i, 'original').logprob / get(i, 'original').numTokens);
    } else if (adapterSpec.method === 'multiple_choice_separate_calibrated') {
      scores = references.map((_, i) => get(i, 'original').logprob - get(i, 'calibration').logprob);
    } else {
      throw new HelmError('ValueError', `Unknown adapter method: ${adapterSpec.method}`);
    }
    if (answers.length === 0) throw new HelmError('ValueError', `instance ${first.instance.id} has no correct reference (max() arg is an empty sequence)`);
    const maxScore = Math.max(...scores);
    const maxAnswer = Math.max(...answers.map((i) => scores[i]!));
    // scipy.special.softmax: np.exp(x - max) / np.sum, as numpy computes them.
    const shifted = scores.map((s) => npExp(s - maxScore));
    const total = npSum(shifted);
    const maxProb = Math.max(...shifted.map((e) => e / total));
    const last = referenceStates.at(-1)!;
    return [
      ...this.computeAllGeneralMetrics(adapterSpec, last, services),
      statOf(metricName('max_prob'), pyFloat(maxProb)),
      statOf(metricName('exact_match'), pyFloat(maxScore === maxAnswer ? 1 : 0)),
      statOf(metricName('predicted_index'), scores.indexOf(maxScore)),
    ];
  }

  override deriveStats(stats: Stat[]): Stat[] {
    return computePerplexityMetrics(stats);
  }

  override derivePerInstanceStats(perInstance: Map<Instance, Stat[]>): Stat[] {
    return [...computeCalibrationMetrics(perInstance), statOf(metricName('num_instances'), perInstance.size)];
  }
}

/** `compute_perplexity_metrics`: perplexity, bits_per_byte and logprob_per_byte from the summed LM stats. */
export function computePerplexityMetrics(stats: Stat[]): Stat[] {
  const logprob = uniqueStatByName(stats, 'logprob');
  const numTokens = uniqueStatByName(stats, 'num_perplexity_tokens');
  const numBytes = uniqueStatByName(stats, 'num_bytes');
  if (!logprob) return [];
  const out: Stat[] = [];
  const lp = toNumber(logprob.sum);
  if (numTokens && toNumber(numTokens.sum) > 0) out.push(statOf(metricName('perplexity'), pyFloat(glibcPow(Math.E, -lp / toNumber(numTokens.sum)))));
  if (numBytes && toNumber(numBytes.sum) > 0) {
    const bytes = toNumber(numBytes.sum);
    out.push(statOf(metricName('bits_per_byte'), pyFloat(-lp / bytes / glibcLog(2))));
    out.push(statOf(metricName('logprob_per_byte'), pyFloat(lp / bytes)));
  }
  return out;
}

/** `compute_calibration_metrics` over the instances of one context. */
export function computeCalibrationMetrics(perInstance: Map<Instance, Stat[]>): Stat[] {
  const probs: number[] = [];
  const correct: number[] = [];
  for (const stats of perInstance.values()) {
    const maxProb = uniqueStatByName(stats, 'max_prob');
    const em = uniqueStatByName(stats, 'exact_match');
    if (maxProb && em && maxProb.mean !== undefined && em.mean !== undefined) {
      const c = toNumber(em.mean);
      if (Math.abs(c - 1) > 1e-8 + 1e-5 && Math.abs(c) > 1e-8) throw new HelmError('AssertionError', `exact_match of one instance must be 0 or 1, got ${c}`);
      probs.push(toNumber(maxProb.mean));
      correct.push(Math.trunc(c));
    }
  }
  if (probs.length === 0) return [];
  const name = (n: string): MetricName => metricName(n);
  const out: Stat[] = [statOf(name('ece_10_bin'), pyFloat(eceEqualMass(probs, correct, 10))), statOf(name('ece_1_bin'), pyFloat(eceEqualWidth(probs, correct, 1)))];
  const [area, acc10] = selectiveStats(probs, correct);
  out.push(statOf(name('selective_cov_acc_area'), pyFloat(area)), statOf(name('selective_acc@10'), pyFloat(acc10)));
  const numCorrect = correct.reduce((a, b) => a + b, 0);
  if (numCorrect === 0 || numCorrect === correct.length) {
    out.push(statOf(name('platt_ece_10_bin'), pyFloat(0)), statOf(name('platt_ece_1_bin'), pyFloat(0)));
  } else {
    const scaler = plattScaler(probs, correct);
    const calibrated = scaler.calibrate(probs);
    out.push(
      statOf(name('platt_coef'), pyFloat(scaler.coef)),
      statOf(name('platt_intercept'), pyFloat(scaler.intercept)),
      statOf(name('platt_ece_10_bin'), pyFloat(eceEqualMass(calibrated, correct, 10))),
      statOf(name('platt_ece_1_bin'), pyFloat(eceEqualWidth(calibrated, correct, 1))),
    );
  }
  return out;
}
