/**
 * A worker thread that hosts onnxruntime sessions, so `session.run` (a synchronous native call) never blocks the main
 * thread. Protocol (one reply per request, in order): create {key, model}, run {key, feeds, shared}, chain {runs,
 * results} (several runs in one round trip), setShared {name, tensor}, release {key}. Must run as compiled .js.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { ChainRun, WireTensor, WorkerReply, WorkerRequest } from './ort-protocol.js';

const sessions = new Map<string, ort.InferenceSession>();
const shared = new Map<string, ort.Tensor>();
const options: ort.InferenceSession.SessionOptions = {
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
  ...(workerData?.intraOpNumThreads ? { intraOpNumThreads: workerData.intraOpNumThreads as number } : {}),
};

function toTensor(t: WireTensor): ort.Tensor {
  return new ort.Tensor(t.type, t.data as never, t.dims);
}

async function handle(msg: WorkerRequest): Promise<{ reply: WorkerReply; transfer: ArrayBuffer[] }> {
  switch (msg.kind) {
    case 'create': {
      sessions.get(msg.key)?.release();
      sessions.set(msg.key, await ort.InferenceSession.create(msg.model, options));
      return { reply: { id: msg.id, ok: true }, transfer: [] };
    }
    case 'setShared':
      shared.set(msg.name, toTensor(msg.tensor));
      return { reply: { id: msg.id, ok: true }, transfer: [] };
    case 'release': {
      await sessions.get(msg.key)?.release();
      sessions.delete(msg.key);
      return { reply: { id: msg.id, ok: true }, transfer: [] };
    }
    case 'run':
      return reply(msg.id, Object.entries(await runSession(msg, [])));
    case 'chain': {
      const done: Record<string, ort.Tensor>[] = [];
      for (const run of msg.runs) done.push(await runSession(run, done));
      return reply(
        msg.id,
        msg.results.map((r) => {
          const t = done[r.run]?.[r.output];
          if (!t) throw new Error(`chain result ${r.run}:${r.output} does not exist`);
          return [`${r.run}:${r.output}`, t] as const;
        }),
      );
    }
  }
}

function sharedTensor(name: string): ort.Tensor {
  const t = shared.get(name);
  if (!t) throw new Error(`shared input "${name}" was never set`);
  return t;
}

/** Runs one session; feeds are wire tensors, shared tensors, or outputs of earlier runs of the same chain. */
async function runSession(run: ChainRun, earlier: Record<string, ort.Tensor>[]): Promise<Record<string, ort.Tensor>> {
  const session = sessions.get(run.key);
  if (!session) throw new Error(`no session "${run.key}" (create it first)`);
  const feeds: Record<string, ort.Tensor> = {};
  for (const name of run.shared) feeds[name] = sharedTensor(name);
  // Feed name → shared tensor name (offloaded layers keep their resident weights as shared tensors).
  for (const [name, sharedName] of Object.entries(run.sharedAs ?? {})) feeds[name] = sharedTensor(sharedName);
  for (const [name, f] of Object.entries(run.feeds)) {
    if ('output' in f) {
      const t = earlier[f.run]?.[f.output];
      if (!t) throw new Error(`feed ${name} refers to ${f.run}:${f.output}, which no earlier run produced`);
      feeds[name] = t;
    } else feeds[name] = toTensor(f);
  }
  return session.run(feeds);
}

/** The reply with `results` as transferable wire tensors (each output in a buffer of its own). */
function reply(id: number, results: Iterable<readonly [string, ort.Tensor]>): { reply: WorkerReply; transfer: ArrayBuffer[] } {
  const outputs: Record<string, WireTensor> = {};
  const transfer = new Set<ArrayBuffer>();
  for (const [name, t] of results) {
    let data = t.data as Float32Array;
    // Outputs may share one arena; copy so each can be transferred on its own.
    if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength || transfer.has(data.buffer as ArrayBuffer)) data = data.slice();
    transfer.add(data.buffer as ArrayBuffer);
    outputs[name] = { type: t.type as WireTensor['type'], data, dims: [...t.dims] };
  }
  return { reply: { id, ok: true, outputs }, transfer: [...transfer] };
}

let queue: Promise<void> = Promise.resolve();
parentPort!.on('message', (msg: WorkerRequest) => {
  queue = queue.then(async () => {
    try {
      const { reply, transfer } = await handle(msg);
      parentPort!.postMessage(reply, transfer);
    } catch (err) {
      parentPort!.postMessage({ id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) } satisfies WorkerReply);
    }
  });
});
