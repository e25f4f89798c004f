import { request, requestState, type AdapterSpec, type Instance, type Request, type RequestState } from '@flexhelm/core';
import { InContextLearningAdapter } from './in-context-learning-adapter.js';
import { promptText, promptTruncated } from './prompt.js';

/** The request of a generation-style adapter: `num_outputs` completions as the adapter spec asks for them. */
export function generationRequest(spec: AdapterSpec, prompt: string): Request {
  return request({
    model: spec.model,
    prompt,
    num_completions: spec.num_outputs,
    temperature: spec.temperature,
    max_tokens: spec.max_tokens,
    stop_sequences: spec.stop_sequences,
    random: spec.random,
  });
}

/** `generation`: one request per eval instance; the model writes the output after the output prefix. */
export class GenerationAdapter extends InContextLearningAdapter {
  generateRequests(evalInstance: Instance): RequestState[] {
    const prompt = this.constructPrompt(this.trainInstances, evalInstance, false, undefined);
    return [
      requestState({
        instance: evalInstance,
        train_trial_index: this.trainTrialIndex,
        request: generationRequest(this.adapterSpec, promptText(prompt)),
        num_train_instances: prompt.trainInstanceBlocks.length,
        prompt_truncated: promptTruncated(prompt),
      }),
    ];
  }
}
