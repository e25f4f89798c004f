import { ADAPT_METHODS, HelmError, type AdapterSpec, type WindowService } from '@flexhelm/core';
import type { Adapter } from './adapter.js';
import { BinaryRankingAdapter } from './binary-ranking-adapter.js';
import { GenerationAdapter } from './generation-adapter.js';
import { LanguageModelingAdapter } from './language-modeling-adapter.js';
import { MultipleChoiceCalibratedAdapter } from './multiple-choice-calibrated-adapter.js';
import { MultipleChoiceJointAdapter } from './multiple-choice-joint-adapter.js';
import { MultipleChoiceSeparateAdapter } from './multiple-choice-separate-adapter.js';

/** HELM 0.2.1's `AdapterFactory.get_adapter`: the adapter of `adapter_spec.method`, measuring with `windowService`. */
export function getAdapter(adapterSpec: AdapterSpec, windowService: WindowService): Adapter {
  switch (adapterSpec.method) {
    case 'generation':
      return new GenerationAdapter(adapterSpec, windowService);
    case 'language_modeling':
      return new LanguageModelingAdapter(adapterSpec, windowService);
    case 'multiple_choice_joint':
      return new MultipleChoiceJointAdapter(adapterSpec, windowService);
    case 'multiple_choice_separate_original':
      return new MultipleChoiceSeparateAdapter(adapterSpec, windowService);
    case 'multiple_choice_separate_calibrated':
      return new MultipleChoiceCalibratedAdapter(adapterSpec, windowService);
    case 'ranking_binary':
      return new BinaryRankingAdapter(adapterSpec, windowService);
    default:
      throw new HelmError('ValueError', `Invalid adaptation method: ${adapterSpec.method}; use one of ${ADAPT_METHODS.join(', ')}`);
  }
}
