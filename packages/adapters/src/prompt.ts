import { pyReSub } from '@flexhelm/python-compat';
import type { Substitution } from '@flexhelm/core';

/** HELM 0.2.1's `Prompt`: the blocks of a prompt and, once cut to fit, the truncated text. */
export interface Prompt {
  globalPrefix: string;
  instancePrefix: string;
  substitutions: readonly Substitution[];
  instructionsBlock: string;
  trainInstanceBlocks: readonly string[];
  evalInstanceBlock: string;
  truncatedText?: string;
}

/**
 * `Prompt.text`: the truncated text when there is a non-empty one, else instructions (when non-empty), train blocks and
 * the eval block joined by the instance prefix, after `global_prefix + " "`, with each substitution applied in turn as
 * Python's `re.sub`.
 */
export function promptText(prompt: Prompt): string {
  if (prompt.truncatedText) return prompt.truncatedText;
  const blocks = [...(prompt.instructionsBlock ? [prompt.instructionsBlock] : []), ...prompt.trainInstanceBlocks, prompt.evalInstanceBlock];
  let text = blocks.join(prompt.instancePrefix);
  if (prompt.globalPrefix) text = `${prompt.globalPrefix} ${text}`;
  for (const subst of prompt.substitutions) text = pyReSub(subst.source, subst.target, text);
  return text;
}

export function promptTruncated(prompt: Prompt): boolean {
  return prompt.truncatedText !== undefined;
}
