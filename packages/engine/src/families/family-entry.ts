import type { FamilyName, ModelDescription } from '../model-description.js';

/**
 * One model family as a plug-in: what `model_type` in config.json selects. Everything family-specific about reading
 * a model lives behind this entry (the config quirks, the checkpoint names inside the description it returns, fused
 * tensors as `checkpointRows`), so nothing outside `families/` branches on a family name.
 */
export interface FamilyEntry {
  modelType: FamilyName;
  /** Parses and checks a config.json object; every bad field is a one-line `ModelFileError` naming it (`source`: the file). */
  describe(json: unknown, source: string): ModelDescription;
  /**
   * BOS/EOS policy of the family's checkpoints: whether prompts start with the BOS token (the HF tokenizer's
   * `add_bos_token`), and that generation stops at the config's EOS id.
   */
  tokens: { prependBos: boolean };
}
