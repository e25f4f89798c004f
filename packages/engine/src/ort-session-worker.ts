/**
 * A worker thread that hosts onnxruntime sessions, so `session.run` (a synchronous native call) never blocks the main
 * thread. Protocol (one reply per request, in order): create {key, model}, run {key, feeds, shared, fetch},
 * setShared {name, tensor}, release {key}, kvStep (a whole forward step against a KV cache kept here), kvClose.
 * Must run as compiled .js.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { ortChunkRows, type CachedLayer, type KvStep, type SessionRun, type WireTensor, type WorkerReply, type WorkerRequest } from './ort-protocol.js';
import { WorkerKvCache } from './ort-worker-kv-cache.js';

const sessions = new Map<string, ort.InferenceSession>();
const shared = new Map<string, ort.Tensor>();
const kvCaches = new Map<number, WorkerKvCache>();
const options: ort.InferenceSession.SessionOptions = {
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
  // The memory pattern would allocate one fresh block per new input shape on the second run; plain arena reuse is
  // enough, and fresh memory is what costs most here (first touch of a page, not the copy).
  enableMemPattern: false,
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
      return reply(msg.id, Object.entries(await runSession(msg, {})));
    case 'kvStep':
      return reply(msg.id, [['y', await kvStep(msg)]]);
    case 'kvClose':
      kvCaches.delete(msg.cache);
      return { reply: { id: msg.id, ok: true }, transfer: [] };
  }
}

function sharedTensor(name: string): ort.Tensor {
  const t = shared.get(name);
  if (!t) throw new Error(`shared input "${name}" was never set`);
  return t;
}

/** Runs one session; `extra` feeds are tensors already in this thread. Returns only the fetched outputs. */
async function runSession(run: SessionRun, extra: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
  const session = sessions.get(run.key);
  if (!session) throw new Error(`no session "${run.key}" (create it first)`);
  const feeds: Record<string, ort.Tensor> = { ...extra };
  for (const name of run.shared) feeds[name] = sharedTensor(name);
  // Feed name → shared tensor name (offloaded layers keep their resident weights as shared tensors).
  for (const [name, sharedName] of Object.entries(run.sharedAs ?? {})) feeds[name] = sharedTensor(sharedName);
  for (const [name, f] of Object.entries(run.feeds)) feeds[name] = toTensor(f);
  // Outputs not fetched stay in onnxruntime's arena: every fetched one is copied into new JS memory.
  return run.fetch ? session.run(feeds, run.fetch) : session.run(feeds);
}

/** Reusable buffers for chunked steps (grown, never shrunk): fresh memory is slow to touch on this kind of machine. */
const scratch = new Map<string, Float32Array>();
function scratchBuffer(name: string, length: number): Float32Array {
  let b = scratch.get(name);
  if (!b || b.length < length) scratch.set(name, (b = new Float32Array(length)));
  return b.subarray(0, length);
}

/** Embedding (or the given hidden state) through the listed layers, with the worker-held cache `msg.cache`. */
async function kvStep(msg: KvStep): Promise<ort.Tensor> {
  let cache = kvCaches.get(msg.cache);
  if (!cache) kvCaches.set(msg.cache, (cache = new WorkerKvCache(msg.batch, msg.heads, msg.headDim)));
  const mask = typeof msg.mask === 'string' ? sharedTensor(msg.mask) : toTensor(msg.mask);
  let x: ort.Tensor;
  if (msg.embed) x = (await runSession({ ...msg.embed, fetch: ['hidden'] }, {})).hidden!;
  else if (msg.x) x = toTensor(msg.x);
  else throw new Error('kvStep needs an embedding run or an input hidden state');
  const [B, S, E] = x.dims as number[];
  const rowsPerChunk = ortChunkRows(S!);
  if (B! <= rowsPerChunk) {
    for (const { index, layer } of msg.layers) {
      cache.reserve(index, S!);
      const past = cache.past(index);
      const out = await runLayer(layer, { x, mask: cache.attentionMask(index, mask), past_k: past.k, past_v: past.v });
      cache.append(index, out.new_k!.data as Float32Array, out.new_v!.data as Float32Array, true);
      x = out.y!;
    }
    return x;
  }
  // Chunked: each layer runs over row ranges (views of the hidden state, mask and past: rows are contiguous in all).
  const H = msg.heads;
  const D = msg.headDim;
  let xData = x.data as Float32Array;
  for (const [n, { index, layer }] of msg.layers.entries()) {
    cache.reserve(index, S!);
    const past = cache.past(index);
    const layerMask = cache.attentionMask(index, mask);
    const maskData = layerMask.data as Float32Array;
    const T = layerMask.dims[3]!;
    // Past slots per (batch, head) row: the cache's capacity (unused slots are masked).
    const P = past.k.dims[2]!;
    const pastK = past.k.data as Float32Array;
    const pastV = past.v.data as Float32Array;
    // Hidden states alternate between two buffers: layer n reads one and writes the other.
    const y = scratchBuffer(n % 2 ? 'y1' : 'y0', B! * S! * E!);
    const newK = scratchBuffer('k', B! * H * S! * D);
    const newV = scratchBuffer('v', B! * H * S! * D);
    for (let b0 = 0; b0 < B!; b0 += rowsPerChunk) {
      const b1 = Math.min(B!, b0 + rowsPerChunk);
      const rows = b1 - b0;
      const view = (a: Float32Array, perRow: number, dims: number[]) => new ort.Tensor('float32', a.subarray(b0 * perRow, b1 * perRow), [rows, ...dims]);
      const out = await runLayer(layer, {
        x: view(xData, S! * E!, [S!, E!]),
        mask: view(maskData, S! * T, [1, S!, T]),
        past_k: view(pastK, H * P * D, [H, P, D]),
        past_v: view(pastV, H * P * D, [H, P, D]),
      });
      y.set(out.y!.data as Float32Array, b0 * S! * E!);
      newK.set(out.new_k!.data as Float32Array, b0 * H * S! * D);
      newV.set(out.new_v!.data as Float32Array, b0 * H * S! * D);
    }
    cache.append(index, newK, newV, false);
    xData = y;
  }
  // The scratch buffer stays here; the reply gets its own copy.
  return new ort.Tensor('float32', xData.slice(), [B!, S!, E!]);
}

async function runLayer(layer: CachedLayer, feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
  return runSession({ key: layer.key, feeds: {}, shared: [], ...(layer.sharedAs ? { sharedAs: layer.sharedAs } : {}), fetch: ['y', 'new_k', 'new_v'] }, feeds);
}

/** The reply with `results` as transferable wire tensors (each output in a buffer of its own). */
function reply(id: number, results: Iterable<readonly [string, ort.Tensor]>): { reply: WorkerReply; transfer: ArrayBuffer[] } {
  const outputs: Record<string, WireTensor> = {};
  const transfer = new Set<ArrayBuffer>();
  for (const [name, t] of results) {
    let data = t.data as Float32Array;
    // Outputs may share one buffer; copy so each can be transferred on its own.
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
