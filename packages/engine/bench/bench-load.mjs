#!/usr/bin/env node
// `node bench/bench-load.mjs [--models opt-125m,opt-350m] [--dtypes f16,f32] [--repeats 5] [--json FILE]`
// What the NaN/Inf check costs when a checkpoint loads: a random model of a published shape is written with makeModel,
// then loaded with the check on and off, alternately (median of the repeats): the read + decode of every tensor
// alone, and a full Engine load into the onnxruntime backend. Not a test: the numbers depend on the machine and its
// load (run it under the machine-wide bench lock). Needs a built @flexhelm/engine (dist/).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { makeModel, Engine, SafetensorsSource } from '../dist/index.js';
import { OrtBackend } from '../../ort-backend/dist/index.js';

const { values } = parseArgs({
  options: {
    models: { type: 'string', default: 'opt-125m' },
    dtypes: { type: 'string', default: 'f16,f32' },
    repeats: { type: 'string', default: '5' },
    json: { type: 'string' },
  },
});
const repeats = Number(values.repeats);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-bench-load-'));
const results = [];

function readAll(file, checkFinite) {
  const src = new SafetensorsSource(file, { checkFinite });
  const t = performance.now();
  let values = 0;
  for (const name of src.tensors.keys()) values += src.read(name).length;
  const ms = performance.now() - t;
  src.close();
  return { ms, values };
}

async function engineLoad(file, config, checkFinite) {
  const t = performance.now();
  const engine = await Engine.fromSource(config, new SafetensorsSource(file, { checkFinite }), { backend: new OrtBackend() });
  const ms = performance.now() - t;
  await engine.close();
  return ms;
}

try {
  for (const model of values.models.split(',')) {
    for (const dtype of values.dtypes.split(',')) {
      const folder = join(dir, `${model}-${dtype}`);
      const config = makeModel({ config: model, outDir: folder, dtype, seed: 1 });
      const file = join(folder, 'model.safetensors');
      const times = { read: { on: [], off: [] }, load: { on: [], off: [] } };
      readAll(file, true); // warm the page cache and the JIT
      let count = 0;
      for (let r = 0; r < repeats; r++) {
        // Alternate the order so drift on a shared machine falls on both sides.
        for (const check of r % 2 ? [false, true] : [true, false]) {
          const read = readAll(file, check);
          count = read.values;
          times.read[check ? 'on' : 'off'].push(read.ms);
          times.load[check ? 'on' : 'off'].push(await engineLoad(file, config, check));
        }
      }
      const row = { model, dtype, values: count, repeats };
      for (const part of ['read', 'load']) {
        const on = median(times[part].on);
        const off = median(times[part].off);
        row[part] = { onMs: Math.round(on), offMs: Math.round(off), costPercent: Number((((on - off) / off) * 100).toFixed(1)) };
      }
      // The check's share of a full load: the read-only difference over the full load time.
      row.checkShareOfLoadPercent = Number((((row.read.onMs - row.read.offMs) / row.load.offMs) * 100).toFixed(1));
      results.push(row);
      console.log(JSON.stringify(row));
      rmSync(folder, { recursive: true, force: true });
    }
  }
  if (values.json) writeFileSync(values.json, `${JSON.stringify({ date: new Date().toISOString(), cpus: cpus().length, loadavg: loadavg(), results }, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
