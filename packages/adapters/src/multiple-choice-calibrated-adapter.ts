import { instance, type Instance, type RequestState } from '@flexhelm/core';
import { MultipleChoiceSeparateAdapter } from './multiple-choice-separate-adapter.js';

/**
 * `multiple_choice_separate_calibrated`: per reference, the original request and a calibration request whose prompt
 * is the reference after the input "Answer:" with no train examples (GPT-3 paper §2.4).
 */
export class MultipleChoiceCalibratedAdapter extends MultipleChoiceSeparateAdapter {
  override generateRequests(evalInstance: Instance): RequestState[] {
    const calibrationInstance = instance({ ...evalInstance, input: { text: 'Answer:' } });
    return evalInstance.references.flatMap((_, i) => [
      this.constructRequestState(this.constructPrompt(this.trainInstances, evalInstance, true, i), i, evalInstance),
      this.constructRequestState(this.constructPrompt([], calibrationInstance, true, i), i, evalInstance, 'calibration'),
    ]);
  }
}
