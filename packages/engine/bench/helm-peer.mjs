#!/usr/bin/env node
// The peer side of `pnpm bench:helm` (apps/cli/bench/bench-helm.mjs): HELM's requests of one run, answered with
// @huggingface/transformers as a TypeScript user would — tokenizer and model from the exported folder, greedy
// `generate` on one batch of requests at a time (left-padded). Lives here because @huggingface/transformers is this
// package's dev dependency.
// usage: node helm-peer.mjs MODELS_DIR NAME REQUESTS_JSON BATCH → prints {"requests", "distinct", "load_s", "generate_s", "wall_s", "generated_tokens", "prompt_tokens"}
// REQUESTS_JSON: HELM `Request` objects (prompt, max_tokens, temperature, …) from the run's scenario_state.json.
import { readFileSync } from 'node:fs';
import { AutoModelForCausalLM, AutoTokenizer, env } from '@huggingface/transformers';
import { exitWithParent } from './exit-with-parent.mjs';

exitWithParent();

const started = performance.now();
const [dir, name, requestsFile, batchText] = process.argv.slice(2);
const batch = Number(batchText);
if (!dir || !name || !requestsFile || !(batch >= 1)) {
  process.stderr.write('usage: node helm-peer.mjs MODELS_DIR NAME REQUESTS_JSON BATCH (BATCH ≥ 1)\n');
  process.exit(2);
}
const requests = JSON.parse(readFileSync(requestsFile, 'utf8'));
for (const r of requests) {
  if (typeof r.prompt !== 'string' || !Number.isInteger(r.max_tokens) || r.max_tokens < 0) throw new Error(`helm-peer: not a HELM request: ${JSON.stringify(r).slice(0, 200)}`);
  if (r.temperature !== 0) throw new Error(`helm-peer: only greedy requests (temperature 0) are compared, got ${r.temperature}`);
}
// flexhelm run answers a repeated request from its cache; the peer answers each distinct request once as well.
const distinct = [...new Map(requests.map((r) => [JSON.stringify([r.prompt, r.max_tokens, r.stop_sequences ?? []]), r])).values()];

env.allowRemoteModels = false;
env.localModelPath = `${dir}/`;
const tokenizer = await AutoTokenizer.from_pretrained(name);
tokenizer.padding_side = 'left';
const model = await AutoModelForCausalLM.from_pretrained(name, { dtype: 'fp32', device: 'cpu' });
const loaded = performance.now();
let generated = 0;
let promptTokens = 0;
// Requests with the same max_tokens go together, in the order HELM lists them.
const byLength = new Map();
for (const r of distinct) byLength.set(r.max_tokens, [...(byLength.get(r.max_tokens) ?? []), r]);
for (const [maxTokens, group] of byLength) {
  for (let i = 0; i < group.length; i += batch) {
    const prompts = group.slice(i, i + batch).map((r) => r.prompt);
    const inputs = tokenizer(prompts, { padding: true });
    await model.generate({ ...inputs, max_new_tokens: maxTokens, min_new_tokens: maxTokens, do_sample: false });
    generated += prompts.length * maxTokens;
    // Real prompt tokens (padding excluded): the work both sides do, for tokens-per-second figures.
    for (const m of inputs.attention_mask.data) promptTokens += Number(m);
  }
}
const done = performance.now();
await model.dispose();
const s = (ms) => +(ms / 1000).toFixed(3);
process.stdout.write(`${JSON.stringify({ requests: requests.length, distinct: distinct.length, load_s: s(loaded - started), generate_s: s(done - loaded), wall_s: s(done - started), generated_tokens: generated, prompt_tokens: promptTokens })}\n`);
