import type { Tokenizer } from '@flexhelm/core';
import { FAMILY_REGISTRY, familyEntry, type ModelDescription } from '@flexhelm/engine';
import { chatEndTokenIds } from './chat-end-tokens.js';
import { readChatTemplate, type ChatTemplate } from './chat-template.js';

/** What the server needs to serve chat completions for a model. */
export interface ChatSetup {
  template: ChatTemplate;
  endTokenIds: readonly number[];
}

/**
 * The chat setup of a model folder, or undefined when the model has no chat template (a base model): the template
 * from tokenizer_config.json (or chat_template.jinja), and the end tokens with the end-of-turn markers of `family`'s
 * entry (without a family: every registered family's markers, each used only where the template writes it).
 */
export function readChatSetup(folder: string, tokenizer: Tokenizer, modelEos: number | undefined, family?: ModelDescription['family']): ChatSetup | undefined {
  const template = readChatTemplate(folder);
  const markers = family !== undefined ? familyEntry(family).chat.endOfTurn : [...new Set([...FAMILY_REGISTRY.values()].flatMap((f) => f.chat.endOfTurn))];
  return template && { template, endTokenIds: chatEndTokenIds(folder, tokenizer, template, modelEos, markers) };
}
