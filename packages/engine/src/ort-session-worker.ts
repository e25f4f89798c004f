/**
 * A worker thread that hosts onnxruntime sessions, so `session.run` (a synchronous native call) never blocks the main
 * thread. Protocol (one reply per request, in order): create {key, model}, run {key, feeds, shared}, setShared
 * {name, tensor}, release {key}. Must run as compiled .js.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { WireTensor, WorkerReply, WorkerRequest } from './ort-protocol.js';

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
    case 'run': {
      const session = sessions.get(msg.key);
      if (!session) throw new Error(`no session "${msg.key}" (create it first)`);
      const feeds: Record<string, ort.Tensor> = {};
      for (const name of msg.shared) {
        const t = shared.get(name);
        if (!t) throw new Error(`shared input "${name}" was never set`);
        feeds[name] = t;
      }
      // Feed name → shared tensor name (offloaded layers keep their resident weights as shared tensors).
      for (const [name, sharedName] of Object.entries(msg.sharedAs ?? {})) {
        const t = shared.get(sharedName);
        if (!t) throw new Error(`shared input "${sharedName}" was never set`);
        feeds[name] = t;
      }
      for (const [name, t] of Object.entries(msg.feeds)) feeds[name] = toTensor(t);
      const results = await session.run(feeds);
      const outputs: Record<string, WireTensor> = {};
      const transfer = new Set<ArrayBuffer>();
      for (const [name, t] of Object.entries(results)) {
        let data = t.data as Float32Array;
        // Outputs may share one arena; copy so each can be transferred on its own.
        if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength || transfer.has(data.buffer as ArrayBuffer)) data = data.slice();
        transfer.add(data.buffer as ArrayBuffer);
        outputs[name] = { type: t.type as WireTensor['type'], data, dims: [...t.dims] };
      }
      return { reply: { id: msg.id, ok: true, outputs }, transfer: [...transfer] };
    }
  }
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
