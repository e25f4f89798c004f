import { isCorrect, request, requestState, type Instance, type RequestState } from '@flexhelm/core';
import { InContextLearningAdapter } from './in-context-learning-adapter.js';
import { pyRstrip } from '@flexhelm/python-compat';
import { promptText, promptTruncated } from './prompt.js';

/** `prefix` with every "A" replaced by the i-th letter (`"\nA. "`, 2 → `"\nC. "`). */
export function referencePrefix(prefix: string, i: number): string {
  return prefix.replaceAll('A', String.fromCodePoint(65 + i));
}

/** `multiple_choice_joint`: all references lettered in one prompt; the model answers with one letter token. */
export class MultipleChoiceJointAdapter extends InContextLearningAdapter {
  generateRequests(evalInstance: Instance): RequestState[] {
    const spec = this.adapterSpec;
    const prompt = this.constructPrompt(this.trainInstances, evalInstance, false, undefined);
    const outputMapping: Record<string, string> = {};
    evalInstance.references.forEach((ref, i) => {
      outputMapping[referencePrefix('A', i)] = ref.output.text;
    });
    return [
      requestState({
        instance: evalInstance,
        train_trial_index: this.trainTrialIndex,
        output_mapping: outputMapping,
        request: request({
          model: spec.model,
          prompt: promptText(prompt),
          num_completions: 1,
          top_k_per_token: spec.num_outputs,
          temperature: 0,
          max_tokens: 1,
          stop_sequences: [],
          random: spec.random,
        }),
        num_train_instances: prompt.trainInstanceBlocks.length,
        prompt_truncated: promptTruncated(prompt),
      }),
    ];
  }

  override constructExamplePrompt(inst: Instance, includeOutput: boolean): string {
    const spec = this.adapterSpec;
    let result = spec.input_prefix + inst.input.text + spec.input_suffix;
    let output = 'n/a';
    inst.references.forEach((ref, i) => {
      result += referencePrefix(spec.reference_prefix, i) + ref.output.text + spec.reference_suffix;
      if (isCorrect(ref) && output === 'n/a') output = referencePrefix('A', i);
    });
    result += includeOutput ? spec.output_prefix + output + spec.output_suffix : pyRstrip(spec.output_prefix);
    return result;
  }
}
