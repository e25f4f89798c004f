#!/usr/bin/env node
// `node bench/accuracy-report.mjs [--json FILE] [--layers 2] [--tokens 64]`
// Accuracy of each oneDNN dtype against fp32: (1) the conformance models in /work/shared/conformance/opt (prompt
// logits vs the transformers golden data, greedy ids), (2) a random opt-125m-shaped model (full width and vocabulary,
// `--layers` layers) made with makeModel: logit error and greedy agreement over `--tokens` tokens (measureAccuracy).
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Engine, generate, makeModel } from '@flexhelm/engine';
import { OneDnnBackend, measureAccuracy, passesGate, ACCURACY_GATE } from '../dist/index.js';

const { values } = parseArgs({ options: { json: { type: 'string' }, layers: { type: 'string', default: '2' }, tokens: { type: 'string', default: '64' }, conformance: { type: 'string', default: fileURLToPath(new URL('../../../../shared/conformance/opt', import.meta.url)) } } });
const log = (...a) => console.error(...a);
const variants = [
  ['fp32', { dtype: 'fp32' }],
  ['bf16', { dtype: 'bf16' }],
  ['int8 per-token', { dtype: 'int8', experimental: true, activationScale: 'token' }],
  ['int8 per-tensor', { dtype: 'int8', experimental: true, activationScale: 'tensor' }],
];

const conformance = [];
const root = values.conformance;
for (const model of existsSync(root) ? readdirSync(root).filter((d) => existsSync(join(root, d, 'golden.json'))).sort() : []) {
  const golden = JSON.parse(readFileSync(join(root, model, 'golden.json'), 'utf8'));
  if (golden.logits_layout !== 'full') continue;
  for (const [name, options] of variants) {
    const engine = await Engine.load(join(root, model, 'f32'), { backend: new OneDnnBackend(options) });
    const run = engine.startBatch(golden.input_ids.length);
    const L = golden.input_ids[0].length;
    const hidden = await run.step(golden.input_ids, golden.attention_mask);
    const picks = golden.attention_mask.flatMap((m, row) => m.flatMap((on, pos) => (on ? [{ row, pos }] : [])));
    const logits = await run.logits(hidden, L, picks);
    const V = engine.description.vocabSize;
    let maxAbs = 0;
    let sumAbs = 0;
    let argmax = 0;
    picks.forEach((p, i) => {
      const record = golden.prompt_logits[p.row][p.pos];
      let best = 0;
      for (let v = 0; v < V; v++) {
        const d = Math.abs(record.logits[v] - logits[i * V + v]);
        maxAbs = Math.max(maxAbs, d);
        sumAbs += d;
        if (logits[i * V + v] > logits[i * V + best]) best = v;
      }
      if (best === record.argmax) argmax++;
    });
    const results = await generate(engine, golden.prompts.map((prompt) => ({ prompt, maxNewTokens: 8, stopAtEos: false })), { maxBatchSize: 3 });
    const ids = results.map((r) => r.completions[0].tokens.map((t) => t.id));
    const greedySame = ids.flat().filter((id, i) => id === golden.greedy.generated_ids.flat()[i]).length;
    await engine.close();
    const row = { model, dtype: name, max_abs: +maxAbs.toExponential(2), mean_abs: +(sumAbs / (picks.length * V)).toExponential(2), argmax: `${argmax}/${picks.length}`, greedy_ids: `${greedySame}/${golden.greedy.generated_ids.flat().length}` };
    conformance.push(row);
    log(JSON.stringify(row));
  }
}

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-accuracy-'));
const random = [];
try {
  const layers = Number(values.layers);
  const path = join(dir, 'model');
  makeModel({ config: { base: 'opt-125m', name: `opt-125m-${layers}l`, numHiddenLayers: layers, maxPositionEmbeddings: 256 }, outDir: path, seed: 1 });
  const reference = await Engine.load(path, { backend: new OneDnnBackend({ dtype: 'fp32' }) });
  const prompts = [[2, 100, 2000, 30000, 7], [2, 31337, 42, 8, 9, 10, 11], [2, 5, 50000, 777]];
  for (const [name, options] of variants.slice(1)) {
    const candidate = await Engine.load(path, { backend: new OneDnnBackend(options) });
    const r = await measureAccuracy(reference, candidate, prompts, { newTokens: Number(values.tokens) });
    await candidate.close();
    const row = {
      model: `opt-125m-shaped, ${layers} layers`,
      dtype: name,
      max_abs: +r.logits.maxAbs.toExponential(2),
      mean_abs: +r.logits.meanAbs.toExponential(2),
      max_rel_rms: +(r.logits.maxAbs / r.logits.refRms).toExponential(2),
      mean_rel_rms: +(r.logits.meanAbs / r.logits.refRms).toExponential(2),
      argmax: `${r.logits.argmaxAgree}/${r.logits.rows}`,
      greedy_free_running: `${r.greedy.freeRunningAgree}/${r.greedy.tokens}`,
      greedy_teacher_forced: `${r.greedy.teacherForcedAgree}/${r.greedy.tokens}`,
      gate: passesGate(r.logits) && r.greedy.teacherForcedAgree >= 0.95 * r.greedy.tokens ? 'pass' : 'fail',
    };
    random.push(row);
    log(JSON.stringify(row));
  }
  await reference.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const text = `${JSON.stringify({ date: new Date().toISOString(), gate: { ...ACCURACY_GATE, teacherForcedAgreement: 0.95 }, conformance, random }, null, 2)}\n`;
if (values.json) {
  writeFileSync(`${values.json}.tmp`, text);
  renameSync(`${values.json}.tmp`, values.json);
} else process.stdout.write(text);
