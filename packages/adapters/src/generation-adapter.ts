import { request, requestState, type Instance, type RequestState } from '@flexhelm/core';
import { InContextLearningAdapter } from './in-context-learning-adapter.js';
import { promptText, promptTruncated } from './prompt.js';

/** `generation`: one request per eval instance; the model writes the output after the output prefix. */
export class GenerationAdapter extends InContextLearningAdapter {
  generateRequests(evalInstance: Instance): RequestState[] {
    const spec = this.adapterSpec;
    const prompt = this.constructPrompt(this.trainInstances, evalInstance, false, undefined);
    return [
      requestState({
        instance: evalInstance,
        train_trial_index: this.trainTrialIndex,
        request: request({
          model: spec.model,
          prompt: promptText(prompt),
          num_completions: spec.num_outputs,
          temperature: spec.temperature,
          max_tokens: spec.max_tokens,
          stop_sequences: spec.stop_sequences,
          random: spec.random,
        }),
        num_train_instances: prompt.trainInstanceBlocks.length,
        prompt_truncated: promptTruncated(prompt),
      }),
    ];
  }
}
