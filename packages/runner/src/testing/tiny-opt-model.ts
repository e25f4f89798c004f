import { makeModel, type ModelDescription } from '@flexhelm/engine';
import { writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';

/** The shape of the tests' model: 2 layers, hidden 64, 4 heads, with OPT's real 50272-row vocabulary. */
export const TINY_OPT_SHAPE = { hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, vocabSize: 50272 } as const;

/**
 * The one tiny test model of the packages and apps that run HELM end to end: a random OPT of {@link TINY_OPT_SHAPE}
 * with the OPT-shaped GPT-2 tokenizer, written in Hugging Face layout to `outDir` (atomically, as `make-model` does).
 * Test code only: `@flexhelm/runner/testing`, never the main entry.
 */
export function makeTinyOptModel(outDir: string, seed = 0): ModelDescription {
  return makeModel({ config: { ...TINY_OPT_SHAPE }, outDir, seed, beforeCommit: (dir) => writeOptShapedTokenizerFolder(dir) });
}
