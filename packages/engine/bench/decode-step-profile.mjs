// [DIR=model-folder] [MODEL=opt-1.3b] node packages/engine/bench/decode-step-profile.mjs TREE [batch 8] [prompt 128] [steps 48]
// One llama-3.2-1b (or MODEL; random weights in memory, or the model folder DIR) on oneDNN bf16 from the built checkout TREE
// (this repository or another, e.g. a before/after pair): prefill `prompt` tokens × batch, then `steps` decode steps
// as FlexLLMGen's loop runs them; prints one JSON line: wall ms per step, the backend's head/embed calls, and the
// native layer profile per step (where the layers' time goes). Not a test: figures depend on the machine and its load.
const [tree, batchArg = '8', promptArg = '128', stepsArg = '48'] = process.argv.slice(2);
const B = Number(batchArg), P = Number(promptArg), steps = Number(stepsArg);
const eng = await import(`${tree}/packages/engine/dist/index.js`);
const dnn = await import(`${tree}/packages/onednn-backend/dist/index.js`);
const Engine = eng.Engine ?? eng.OptEngine;
// MODEL: another built-in shape (opt-1.3b, qwen2-0.5b, …), through whichever name lookup the checkout has.
const name = process.env.MODEL ?? 'llama-3.2-1b';
const d = eng.descriptionByName ? eng.descriptionByName(name) : name.startsWith('opt-') ? eng.optConfigByName(name) : eng.describeHfConfig(eng.resolveHubConfig({ base: name }).hf, name);
const backend = new dnn.OneDnnBackend({ dtype: 'bf16' });
const engine = process.env.DIR ? await Engine.load(process.env.DIR, { backend }) : await Engine.dummy(d, { backend, seed: 1 });
const binding = dnn.requireBinding();
const ids = Array.from({ length: B }, (_, b) => Array.from({ length: P }, (_, s) => 4 + ((b * 131 + s * 17) % 5000)));
const run = engine.startBatch(B);
const picks = (seq) => ids.map((_, row) => ({ row, pos: seq - 1 }));
await run.logits(await run.step(ids, ids.map((r) => r.map(() => 1))), P, picks(P));
// Wrap the backend's methods to time them (await'ed promise durations).
const timed = {};
for (const name of ['layerInPlace', 'layer', 'head', 'embed', 'forward']) {
  const f = backend[name];
  if (typeof f !== 'function') continue;
  backend[name] = async function (...args) {
    const t = performance.now();
    try { return await f.apply(this, args); } finally { timed[name] = (timed[name] ?? 0) + performance.now() - t; }
  };
}
binding.layerProfile(true);
binding.layerProfile(true);
const t0 = performance.now();
for (let t = 0; t < steps; t++) await run.logits(await run.step(ids.map(() => [7]), ids.map(() => [1])), 1, picks(1));
const wall = performance.now() - t0;
const prof = binding.layerProfile(false);
const per = (x) => +(x / steps).toFixed(2);
console.log(JSON.stringify({ tree, model: name, B, P, steps, msPerStep: per(wall), backendMsPerStep: Object.fromEntries(Object.entries(timed).map(([k, v]) => [k, per(v)])), nativeCalls: prof.calls, nativeMsPerStep: Object.fromEntries(Object.entries(prof.ms).map(([k, v]) => [k, per(v)])) }));
await run.close();
await engine.close();
