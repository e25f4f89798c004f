import type { Tokenizer } from '@flexhelm/core';
import { chatEndTokenIds } from './chat-end-tokens.js';
import { readChatTemplate, type ChatTemplate } from './chat-template.js';

/** What the server needs to serve chat completions for a model. */
export interface ChatSetup {
  template: ChatTemplate;
  endTokenIds: readonly number[];
}

/** The chat setup of a model folder, or undefined when the model has no chat template (a base model). */
export function readChatSetup(folder: string, tokenizer: Tokenizer, modelEos: number | undefined): ChatSetup | undefined {
  const template = readChatTemplate(folder);
  return template && { template, endTokenIds: chatEndTokenIds(folder, tokenizer, template, modelEos) };
}
