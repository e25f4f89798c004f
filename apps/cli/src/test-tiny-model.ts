import { makeModel } from '@flexhelm/engine';
import { writeOptShapedTokenizerFolder } from '@flexhelm/tokenizer';

/**
 * The CLI tests' model: a random 2-layer OPT (hidden 64) with OPT's real 50272-row output layer and the OPT-shaped
 * GPT-2 tokenizer, written in Hugging Face layout to `outDir`.
 */
export function makeTinyTestModel(outDir: string, seed: number): void {
  makeModel({
    config: { hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, vocabSize: 50272 },
    outDir,
    seed,
    beforeCommit: (dir) => writeOptShapedTokenizerFolder(dir),
  });
}
