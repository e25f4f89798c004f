import { optDescription } from '../../model-description.js';
import { optConfigFromHf } from '../../opt-config.js';
import type { FamilyEntry } from '../family-entry.js';

/** OPT (facebook/opt-*): LayerNorm, learned positions with offset 2, ReLU MLP, tied head; its own config reader. */
export const optFamily: FamilyEntry = {
  modelType: 'opt',
  describe: (json, source) => optDescription(optConfigFromHf(json, source)),
  // OPT's GPT-2 tokenizer prepends `</s>` (id 2), which is its bos_token_id.
  tokens: { prependBos: true },
};
