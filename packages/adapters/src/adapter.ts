import type { AdapterSpec, Instance, RequestState, ScenarioState, WindowService } from '@flexhelm/core';
import { getRunInstances } from './get-run-instances.js';

/** HELM 0.2.1's `Adapter`: turns a scenario's instances into request states, guided by the adapter spec. */
export abstract class Adapter {
  constructor(
    readonly adapterSpec: AdapterSpec,
    readonly windowService: WindowService,
  ) {}

  /** Every train instance, then at most `max_eval_instances` eval instances (numpy seed-0 permutation order). */
  getRunInstances(instances: readonly Instance[]): Instance[] {
    return getRunInstances(instances, this.adapterSpec.max_eval_instances);
  }

  /** The request states of every instance the method adapts, as a `ScenarioState`. */
  abstract adapt(instances: readonly Instance[], parallelism?: number): ScenarioState;

  /** The request states of one eval instance. */
  abstract generateRequests(evalInstance: Instance): RequestState[];
}
