import {
  metricName,
  perturbationDescription,
  scenarioStateInstances,
  type AdapterSpec,
  type Instance,
  type MetricName,
  type PerturbationDescription,
  type PerInstanceStats,
  type RequestState,
  type ScenarioState,
  type Stat,
  type WindowService,
} from '@flexhelm/core';
import { contextKey, contextOfName, metricNameKey, perturbationKey, withName, type MetricContext } from './metric-name-key.js';
import { addToStat, mergeStat, newStat, StatTable, takeMean } from './stat.js';

/** What metrics may need besides the scenario state (HELM's MetricService: the model's tokenizer/window). */
export interface MetricServices {
  /** The window service of the run's model (`adapter_spec.model`): prompt token counts and reference tokenization. */
  windowService?: WindowService;
}

/** HELM's `MetricResult{aggregated_stats, per_instance_stats}`. */
export interface MetricResult {
  aggregatedStats: Stat[];
  perInstanceStats: PerInstanceStats[];
}

/** `add_context(stat, context)`: a copy of `stat` named with the context's split, sub_split and perturbation. */
export function addContext(stat: Stat, context: MetricContext): Stat {
  return mergeStat(newStat(withName(stat.name, { split: context.split, sub_split: context.sub_split, perturbation: context.perturbation })), stat);
}

export function contextOfInstance(instance: Instance): MetricContext {
  return { split: instance.split, sub_split: instance.sub_split, perturbation: instance.perturbation };
}

/** The first stat called `name`, or undefined; HELM asserts there is at most one. */
export function uniqueStatByName(stats: Iterable<Stat>, name: string): Stat | undefined {
  const matches = [...stats].filter((s) => s.name.name === name);
  if (matches.length > 1) throw new Error(`expected at most one stat named ${name}, found ${matches.length}`);
  return matches[0];
}

/** `ScenarioState.request_state_map`: request states by (train trial, instance identity, reference index). */
export class RequestStateIndex {
  private readonly map = new Map<Instance, Map<string, RequestState[]>>();
  readonly instances: Instance[];

  constructor(state: ScenarioState) {
    this.instances = scenarioStateInstances(state);
    for (const rs of state.request_states) {
      let byKey = this.map.get(rs.instance);
      if (!byKey) {
        byKey = new Map();
        this.map.set(rs.instance, byKey);
      }
      const key = `${rs.train_trial_index}/${rs.reference_index ?? 'None'}`;
      const list = byKey.get(key);
      if (list) list.push(rs);
      else byKey.set(key, [rs]);
    }
  }

  get(trial: number, instance: Instance, referenceIndex: number | undefined): RequestState[] {
    return this.map.get(instance)?.get(`${trial}/${referenceIndex ?? 'None'}`) ?? [];
  }
}

/** Groups values by a string key, keeping first-appearance order (Python's defaultdict iteration order). */
export class OrderedGroups<K, V> {
  private readonly groups = new Map<string, { key: K; values: V[] }>();
  constructor(private readonly keyOf: (k: K) => string) {}
  add(key: K, value: V): void {
    const id = this.keyOf(key);
    const g = this.groups.get(id);
    if (g) g.values.push(value);
    else this.groups.set(id, { key, values: [value] });
  }
  touch(key: K): void {
    const id = this.keyOf(key);
    if (!this.groups.has(id)) this.groups.set(id, { key, values: [] });
  }
  entries(): [K, V[]][] {
    return [...this.groups.values()].map((g) => [g.key, g.values]);
  }
}

/**
 * HELM 0.2.1's `Metric`: `evaluate` groups request states by train trial and instance, calls the per-instance hooks,
 * then derives stats per context, evaluates whole groups of request states, computes worst-case stats over
 * perturbations, and averages each trial's stats (`take_mean`) into the result. Subclasses override the hooks.
 */
export abstract class Metric {
  /** HELM's class path, e.g. `helm.benchmark.basic_metrics.BasicMetric` (for messages and the registry). */
  abstract readonly className: string;

  evaluateGeneration(_adapterSpec: AdapterSpec, _requestState: RequestState, _services: MetricServices): Stat[] {
    return [];
  }

  evaluateReferences(_adapterSpec: AdapterSpec, _referenceStates: RequestState[], _services: MetricServices): Stat[] {
    return [];
  }

  evaluateInstances(_requestStates: RequestState[]): Stat[] {
    return [];
  }

  deriveStats(_stats: Stat[]): Stat[] {
    return [];
  }

  derivePerInstanceStats(_perInstance: Map<Instance, Stat[]>): Stat[] {
    return [];
  }

  evaluate(state: ScenarioState, services: MetricServices = {}): MetricResult {
    if (state.adapter_spec.method === 'language_modeling') return this.evaluateLanguageModeling(state, services);
    const adapterSpec = state.adapter_spec;
    const index = new RequestStateIndex(state);
    const globalStats = new StatTable();
    const allPerInstance: PerInstanceStats[] = [];

    for (let trial = 0; trial < adapterSpec.num_train_trials; trial++) {
      const results: Stat[][] = index.instances.map((instance) => {
        const stats: Stat[] = [];
        const generationStates = index.get(trial, instance, undefined);
        if (generationStates.length > 1) {
          throw new Error(`instance ${instance.id}: expected one generation request state in trial ${trial}, found ${generationStates.length}`);
        }
        if (generationStates.length === 1) stats.push(...this.evaluateGeneration(adapterSpec, generationStates[0]!, services));
        const referenceStates = instance.references.flatMap((_, i) => index.get(trial, instance, i));
        if (referenceStates.length > 0) stats.push(...this.evaluateReferences(adapterSpec, referenceStates, services));
        const context = contextOfInstance(instance);
        return stats.map((s) => addContext(s, context));
      });

      const perInstance: PerInstanceStats[] = [];
      index.instances.forEach((instance, i) => {
        if (instance.id === undefined) throw new Error('every instance needs an id (HELM assigns id0, id1, … with with_instance_ids)');
        if (results[i]!.length > 0) perInstance.push({ instance_id: instance.id, perturbation: instance.perturbation, train_trial_index: trial, stats: results[i]! });
      });

      const trialStats = new StatTable();
      for (const stats of results) for (const s of stats) trialStats.merge(s);

      const byContext = new OrderedGroups<MetricContext, Stat>(contextKey);
      for (const s of trialStats.values()) byContext.add(contextOfName(s.name), s);
      for (const [context, stats] of byContext.entries()) {
        for (const s of this.deriveStats(stats)) trialStats.merge(addContext(s, context));
      }

      const perInstanceByContext = new OrderedGroups<MetricContext, [Instance, Stat[]]>(contextKey);
      index.instances.forEach((instance, i) => {
        // HELM only creates a group entry for instances that produced stats.
        if (results[i]!.length > 0) perInstanceByContext.add(contextOfInstance(instance), [instance, results[i]!]);
      });
      for (const [context, entries] of perInstanceByContext.entries()) {
        for (const s of this.derivePerInstanceStats(new Map(entries))) trialStats.merge(addContext(s, context));
      }

      const statesByContext = new OrderedGroups<MetricContext, RequestState>(contextKey);
      for (const instance of index.instances) {
        const context = contextOfInstance(instance);
        statesByContext.touch(context);
        for (const rs of index.get(trial, instance, undefined)) statesByContext.add(context, rs);
      }
      for (const [context, states] of statesByContext.entries()) {
        for (const s of this.evaluateInstances(states)) trialStats.merge(addContext(s, context));
      }

      for (const s of computeWorstCaseMetrics(index.instances, results)) trialStats.merge(s);

      for (const s of trialStats.values()) globalStats.merge(takeMean(s));
      allPerInstance.push(...perInstance);
    }
    return { aggregatedStats: globalStats.values(), perInstanceStats: allPerInstance };
  }

  /** HELM's `evaluate_language_modeling`: one trial, one per-instance entry per request (window). */
  evaluateLanguageModeling(state: ScenarioState, services: MetricServices): MetricResult {
    const globalStats = new StatTable();
    const trialStats = new StatTable();
    const allPerInstance: PerInstanceStats[] = [];
    const instanceIdsPerContext = new OrderedGroups<MetricContext, string>(contextKey);

    for (const rs of state.request_states) {
      const context = contextOfInstance(rs.instance);
      if (rs.instance.id === undefined) throw new Error('every instance needs an id (HELM assigns id0, id1, … with with_instance_ids)');
      const stats = this.evaluateGeneration(state.adapter_spec, rs, services).map((s) => {
        instanceIdsPerContext.add(context, rs.instance.id!);
        return addContext(s, context);
      });
      allPerInstance.push({ instance_id: rs.instance.id, perturbation: rs.instance.perturbation, train_trial_index: 0, stats });
      for (const s of stats) trialStats.merge(s);
    }

    const byContext = new OrderedGroups<MetricContext, Stat>(contextKey);
    for (const s of trialStats.values()) byContext.add(contextOfName(s.name), s);
    const idsByContext = new Map(instanceIdsPerContext.entries().map(([c, ids]) => [contextKey(c), new Set(ids)]));
    for (const [context, stats] of byContext.entries()) {
      for (const s of this.deriveStats(stats)) trialStats.merge(addContext(s, context));
      const numInstances = addToStat(newStat(metricName('num_instances')), idsByContext.get(contextKey(context))?.size ?? 0);
      trialStats.merge(addContext(numInstances, context));
    }
    for (const s of trialStats.values()) globalStats.merge(takeMean(s));
    return { aggregatedStats: globalStats.values(), perInstanceStats: allPerInstance };
  }
}

const variants = new WeakMap<PerturbationDescription, Map<string, PerturbationDescription>>();

/** `replace(perturbation, computed_on=…)`, one shared object per description and value (keys stay cached). */
function withComputedOn(p: PerturbationDescription, computedOn: 'original' | 'worst'): PerturbationDescription {
  let byValue = variants.get(p);
  if (!byValue) {
    byValue = new Map();
    variants.set(p, byValue);
  }
  let v = byValue.get(computedOn);
  if (!v) {
    v = { ...p, computed_on: computedOn };
    byValue.set(computedOn, v);
  }
  return v;
}

/**
 * HELM 0.2.1's `compute_worst_case_metrics`: for every (metric name without perturbation, instance id), merge the
 * perturbed stats into robustness / fairness / per-perturbation groups, add the unperturbed stat, and record the
 * minimum as `computed_on="worst"` (always the minimum, even for lower-is-better metrics, as in 0.2.1), plus the
 * unperturbed value as `computed_on="original"` for each individual perturbation.
 */
export function computeWorstCaseMetrics(instances: Instance[], results: Stat[][]): Stat[] {
  const groups = new OrderedGroups<[MetricName, string], Stat>(([name, id]) => `${metricNameKey(name)}\u0000${id}`);
  instances.forEach((instance, i) => {
    for (const stat of results[i]!) groups.add([withName(stat.name, { perturbation: undefined }), instance.id!], stat);
  });
  const derived = new StatTable();
  const robustnessDescription = perturbationDescription('robustness', { robustness: true });
  const fairnessDescription = perturbationDescription('fairness', { fairness: true });
  for (const [[name], stats] of groups.entries()) {
    let original: Stat | undefined;
    const robustness = newStat(withName(name, { perturbation: robustnessDescription }));
    const fairness = newStat(withName(name, { perturbation: fairnessDescription }));
    const individual = new Map<string, Stat>();
    for (const stat of stats) {
      const p = stat.name.perturbation;
      if (!p) {
        if (original) throw new Error(`two unperturbed stats for ${name.name} of one instance`);
        original = stat;
        continue;
      }
      if (p.robustness) mergeStat(robustness, stat);
      if (p.fairness) mergeStat(fairness, stat);
      const key = perturbationKey(p);
      if (individual.has(key)) throw new Error(`perturbation ${p.name} appears twice for one instance`);
      individual.set(key, mergeStat(newStat(stat.name), stat));
    }
    for (const stat of [robustness, fairness, ...individual.values()]) {
      const p = stat.name.perturbation!;
      if (original) {
        mergeStat(stat, original);
        if (p.name !== 'robustness' && p.name !== 'fairness') {
          const before = withComputedOn(p, 'original');
          derived.merge(mergeStat(newStat(withName(stat.name, { perturbation: before })), original));
        }
      }
      if (stat.count > 0) {
        const worst = withComputedOn(p, 'worst');
        derived.merge(addToStat(newStat(withName(stat.name, { perturbation: worst })), stat.min));
      }
    }
  }
  return derived.values();
}
