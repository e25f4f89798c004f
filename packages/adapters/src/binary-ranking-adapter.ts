import { CORRECT_TAG, HelmError, TRAIN_SPLIT, requestState, type Instance, type RequestState } from '@flexhelm/core';
import { generationRequest } from './generation-adapter.js';
import { InContextLearningAdapter, isEvalSplit } from './in-context-learning-adapter.js';
import { pyRstrip } from '@flexhelm/python-compat';
import { promptText, promptTruncated } from './prompt.js';

export const RANKING_CORRECT_LABEL = 'Yes';
export const RANKING_WRONG_LABEL = 'No';

/**
 * `ranking_binary` (MS MARCO): one generation request per reference (passage), asking whether it answers the query;
 * a train instance contributes one block per reference, labeled Yes/No.
 */
export class BinaryRankingAdapter extends InContextLearningAdapter {
  generateRequests(evalInstance: Instance): RequestState[] {
    return evalInstance.references.map((_, i) => {
      const prompt = this.constructPrompt(this.trainInstances, evalInstance, false, i);
      return requestState({
        instance: evalInstance,
        reference_index: i,
        request_mode: 'original',
        train_trial_index: this.trainTrialIndex,
        request: generationRequest(this.adapterSpec, promptText(prompt)),
        num_train_instances: prompt.trainInstanceBlocks.length,
        prompt_truncated: promptTruncated(prompt),
      });
    });
  }

  override constructExamplePrompt(inst: Instance, includeOutput: boolean, referenceIndex: number | undefined): string {
    const spec = this.adapterSpec;
    let indices: number[];
    if (inst.split === TRAIN_SPLIT) indices = inst.references.map((_, i) => i);
    else if (isEvalSplit(inst.split)) {
      if (referenceIndex === undefined) throw new HelmError('AssertionError', 'ranking_binary needs a reference index for an eval instance');
      indices = [referenceIndex];
    } else {
      throw new HelmError('ValueError', `Unknown split, expected one of: ['train', 'valid', 'test'] (instance ${inst.id ?? '?'} has split ${JSON.stringify(inst.split ?? null)})`);
    }
    const blocks = indices.map((index) => {
      const ref = inst.references[index];
      if (!ref) throw new HelmError('IndexError', `list index out of range (reference ${index} of instance ${inst.id ?? '?'}, which has ${inst.references.length})`);
      const referenceText = spec.reference_prefix + ref.output.text + spec.reference_suffix;
      const queryText = spec.input_prefix + inst.input.text + spec.input_suffix;
      const label = ref.tags.includes(CORRECT_TAG) ? RANKING_CORRECT_LABEL : RANKING_WRONG_LABEL;
      const outputText = includeOutput ? spec.output_prefix + label + spec.output_suffix : pyRstrip(spec.output_prefix);
      return referenceText + queryText + outputText;
    });
    return blocks.join(spec.instance_prefix);
  }
}
