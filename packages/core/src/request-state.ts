import type { AdapterSpec } from './adapter-spec.js';
import type { Instance } from './instance.js';
import type { Request, RequestResult } from './request.js';

/** HELM 0.2.1 `RequestState` (field order = JSON order). */
export interface RequestState {
  instance: Instance;
  reference_index?: number;
  request_mode?: 'original' | 'calibration';
  train_trial_index: number;
  output_mapping?: Record<string, string>;
  request: Request;
  result?: RequestResult;
  num_train_instances: number;
  prompt_truncated: boolean;
  num_conditioning_tokens: number;
}

export function requestState(fields: Omit<RequestState, 'num_conditioning_tokens'> & { num_conditioning_tokens?: number }): RequestState {
  return {
    instance: fields.instance,
    reference_index: fields.reference_index,
    request_mode: fields.request_mode,
    train_trial_index: fields.train_trial_index,
    output_mapping: fields.output_mapping,
    request: fields.request,
    result: fields.result,
    num_train_instances: fields.num_train_instances,
    prompt_truncated: fields.prompt_truncated,
    num_conditioning_tokens: fields.num_conditioning_tokens ?? 0,
  };
}

/** `ScenarioState{adapter_spec, request_states}`. */
export interface ScenarioState {
  adapter_spec: AdapterSpec;
  request_states: RequestState[];
}

/** Unique instances in order of first appearance (HELM's `ScenarioState.instances`; identity, not equality). */
export function scenarioStateInstances(state: ScenarioState): Instance[] {
  const seen = new Set<Instance>();
  const out: Instance[] = [];
  for (const rs of state.request_states) {
    if (!seen.has(rs.instance)) {
      seen.add(rs.instance);
      out.push(rs.instance);
    }
  }
  return out;
}
