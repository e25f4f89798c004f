// Run as a child process by profileHost: the resident memory of a fresh process once an engine with a tiny model has
// run one step (Node, onnxruntime and its worker, the addons), printed as JSON on stdout.
import { readFileSync } from 'node:fs';
import { Engine, makeModelDescription } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';

const tiny = makeModelDescription({ base: 'opt-125m', name: 'profile-tiny', vocabSize: 64, hiddenSize: 16, numHiddenLayers: 1, numAttentionHeads: 2, ffnDim: 32, maxPositionEmbeddings: 64, wordEmbedProjDim: 16 });
const engine = await Engine.dummy(tiny, { backend: new OrtBackend(), seed: 1 });
const run = engine.startBatch(1);
await run.step([[2, 5, 7]], [[1, 1, 1]]);
await engine.close();
const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
process.stdout.write(`${JSON.stringify({ rss: hwm ? Number(hwm) * 1024 : process.memoryUsage().rss })}\n`);
