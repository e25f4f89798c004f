import { optDescription } from './opt-description.js';
import { optConfigFromHf, readOptConfig } from './opt-config.js';
import type { FamilyEntry } from '../family-entry.js';
import { OPT_MODEL_TYPE } from './opt-model-type.js';

/** OPT (facebook/opt-*): LayerNorm, learned positions with offset 2, ReLU MLP, tied head; its own config reader. */
export const optFamily: FamilyEntry = {
  modelType: OPT_MODEL_TYPE,
  describe: (json, source) => optDescription(optConfigFromHf(json, source)),
  // OPT's GPT-2 tokenizer prepends `</s>` (id 2), which is its bos_token_id.
  tokens: { prependBos: true, promptBos: 'config', window: 'helm-opt' },
  chat: { endOfTurn: [] },
  // OPT's sizes are `knownOptNames` (make-model writes them through `makeModel`, with OPT's engine fields).
  make: { architecture: 'OPTForCausalLM', bases: {} },
  readFolder: (dir) => optDescription(readOptConfig(dir)),
  // make-model takes OPT's engine fields (camelCase), as its maker does.
  makeConfigFromHf: (json, source) => optConfigFromHf(json, source) as unknown as Record<string, unknown>,
};
