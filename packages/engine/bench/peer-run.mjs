#!/usr/bin/env node
// One @huggingface/transformers generation run for bench-engine.mjs, in its own process so that running out of memory
// (transformers.js computes logits for every prompt position) loses only this measurement.
// usage: node peer-run.mjs MODELS_DIR BATCH PROMPT_LEN GEN_LEN SEED [WARMUP=1] → prints {"tokens_per_s": x}
// The warm-up is the same batch and prompt length with 2 new tokens, as for our engine.
import { AutoModelForCausalLM, env, Tensor } from '@huggingface/transformers';
import { benchPrompts } from './bench-prompts.mjs';
import { exitWithParent } from './exit-with-parent.mjs';

exitWithParent();

const [dir, batchText, promptText, genText, seedText, warmupText = '1'] = process.argv.slice(2);
const [batch, promptLen, genLen, seed] = [batchText, promptText, genText, seedText].map(Number);
env.allowRemoteModels = false;
env.localModelPath = `${dir}/`;
const model = await AutoModelForCausalLM.from_pretrained('peer', { dtype: 'fp32', device: 'cpu' });
const vocab = model.config.vocab_size;
const run = async (b, L, gen) => {
  const ids = benchPrompts(b, L, vocab, seed);
  const t0 = performance.now();
  await model.generate({
    input_ids: new Tensor('int64', BigInt64Array.from(ids.flat().map(BigInt)), [b, L]),
    attention_mask: new Tensor('int64', new BigInt64Array(b * L).fill(1n), [b, L]),
    max_new_tokens: gen,
    min_new_tokens: gen,
    do_sample: false,
  });
  return (performance.now() - t0) / 1000;
};
await run(warmupText === '1' ? batch : 1, warmupText === '1' ? promptLen : 16, 2);
const seconds = await run(batch, promptLen, genLen);
await model.dispose();
process.stdout.write(`${JSON.stringify({ tokens_per_s: (batch * genLen) / seconds, seconds })}\n`);
