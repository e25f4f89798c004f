import { request, requestState, type Instance, type RequestState } from '@flexhelm/core';
import { InContextLearningAdapter } from './in-context-learning-adapter.js';
import { promptText, promptTruncated, type Prompt } from './prompt.js';

/** `multiple_choice_separate_original`: one echo request per reference, scoring the reference's tokens. */
export class MultipleChoiceSeparateAdapter extends InContextLearningAdapter {
  generateRequests(evalInstance: Instance): RequestState[] {
    return evalInstance.references.map((_, i) =>
      this.constructRequestState(this.constructPrompt(this.trainInstances, evalInstance, true, i), i, evalInstance),
    );
  }

  protected constructRequestState(prompt: Prompt, referenceIndex: number, evalInstance: Instance, requestMode: 'original' | 'calibration' = 'original'): RequestState {
    return requestState({
      instance: evalInstance,
      reference_index: referenceIndex,
      request_mode: requestMode,
      train_trial_index: this.trainTrialIndex,
      request: request({
        model: this.adapterSpec.model,
        prompt: promptText(prompt),
        num_completions: 1,
        temperature: 0,
        max_tokens: 0,
        stop_sequences: [],
        echo_prompt: true,
      }),
      num_train_instances: prompt.trainInstanceBlocks.length,
      prompt_truncated: promptTruncated(prompt),
    });
  }
}
