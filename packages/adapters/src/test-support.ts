import { CORRECT_TAG, instance, reference, type Instance } from '@flexhelm/core';
import { LocalWindowService, getTokenizer } from '@flexhelm/tokenizer';

/** HELM 0.2.1's `OpenAIWindowService` (davinci/curie in HELM's adapter tests): GPT-2 tokenizer, 2048/2049. */
export function openAiWindowService(): LocalWindowService {
  return new LocalWindowService(getTokenizer('huggingface/gpt2'), {
    className: 'OpenAIWindowService', tokenizerName: 'huggingface/gpt2', maxSequenceLength: 2048, maxRequestLength: 2049,
    endOfTextToken: '<|endoftext|>', prefixToken: '<|endoftext|>',
  });
}

export function labeled(text: string, label: string, split = 'train'): Instance {
  return instance({ input: { text }, references: [reference(label, [CORRECT_TAG])], split });
}
