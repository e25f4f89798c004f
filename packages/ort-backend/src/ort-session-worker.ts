/**
 * A worker thread that hosts onnxruntime sessions, so `session.run` (a synchronous native call) never blocks the main
 * thread. Protocol (one reply per request, in order): create {key, model}, run {key, feeds, shared, fetch},
 * setShared {name, tensor}, release {key}, kvStep (a whole forward step against a KV cache kept here), kvClose,
 * kvExpand (a one-row cache copied to more rows),
 * pastLayer (a resident layer's two stages with the past sent along).
 * Must run as compiled .js.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { ortChunkRows, type KvStep, type PastLayer, type SessionRun, type WireTensor, type WorkerReady, type WorkerReply, type WorkerRequest } from './ort-protocol.js';
import { concatRows, newKvBufferPool, WorkerKvCache } from './ort-worker-kv-cache.js';
import { ortSessionOptions } from './ort-session-options.js';

const sessions = new Map<string, ort.InferenceSession>();
const shared = new Map<string, ort.Tensor>();
const kvCaches = new Map<number, WorkerKvCache>();
/** Buffers of closed caches, reused by the next batches (fresh memory is slow to touch here). */
const kvPool = newKvBufferPool();
const options = ortSessionOptions(workerData ?? {});

function toTensor(t: WireTensor): ort.Tensor {
  return new ort.Tensor(t.type, t.data as never, t.dims);
}

async function handle(msg: WorkerRequest): Promise<{ reply: WorkerReply; transfer: ArrayBuffer[] }> {
  switch (msg.kind) {
    case 'create': {
      await sessions.get(msg.key)?.release();
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
    case 'pastLayer':
      return reply(msg.id, Object.entries(await pastLayer(msg)));
    case 'kvClose':
      kvCaches.get(msg.cache)?.release();
      kvCaches.delete(msg.cache);
      return { reply: { id: msg.id, ok: true }, transfer: [] };
    case 'kvExpand': {
      const cache = kvCaches.get(msg.cache);
      if (!cache) throw new Error(`kvExpand: cache ${msg.cache} holds nothing yet (step it first)`);
      cache.expandRows(msg.rows);
      return { reply: { id: msg.id, ok: true }, transfer: [] };
    }
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
  if (!b || b.length < length) {
    b = new Float32Array(length);
    scratch.set(name, b);
  }
  return b.subarray(0, length);
}

/** The embedding through the listed layers, with the worker-held cache `msg.cache`. */
async function kvStep(msg: KvStep): Promise<ort.Tensor> {
  let cache = kvCaches.get(msg.cache);
  if (!cache) {
    cache = new WorkerKvCache(msg.batch, msg.heads, msg.headDim, kvPool);
    kvCaches.set(msg.cache, cache);
  }
  cache.beginStep();
  const mask = toTensor(msg.mask);
  const windowMask = msg.windowMask ? toTensor(msg.windowMask) : undefined;
  const rope = msg.rope ? { cos: toTensor(msg.rope.cos), sin: toTensor(msg.rope.sin) } : undefined;
  let x = (await runSession({ ...msg.embed, fetch: ['hidden'] }, {})).hidden!;
  const [B, S, E] = x.dims as number[];
  // Large steps run each layer over row ranges (views: rows are contiguous in the hidden state, mask and cache), few
  // enough that the attention scores over every key the cache can hold stay bounded.
  const keys = Math.max(mask.dims[3]!, ...msg.layers.map(({ index }) => cache.capacityFor(index, S!)));
  const rowsPerChunk = ortChunkRows(S!, msg.queryHeads ?? msg.heads, keys);
  const chunked = B! > rowsPerChunk;
  for (const [n, { index, layer, windowed }] of msg.layers.entries()) {
    cache.reserve(index, S!);
    const buffers = cache.buffers(index);
    const cap = buffers.k.dims[2]!;
    const empty = cache.tokens(index) === 0;
    // (A prompt step of a resident layer attends over its own keys with the mask as sent.)
    const stepMask = windowed ? windowMask : mask;
    if (!stepMask) throw new Error(`kvStep: layer ${index} is windowed but the step sent no windowMask`);
    const layerMask = empty && !layer.sharedAs ? stepMask : cache.widenMask(index, stepMask, !!layer.sharedAs);
    const T = layerMask.dims[3]!;
    // Hidden states alternate between two buffers: layer n reads one and writes the other.
    const y = chunked ? scratchBuffer(n % 2 ? 'y1' : 'y0', B! * S! * E!) : undefined;
    let last: ort.Tensor | undefined;
    for (let b0 = 0; b0 < B!; b0 += rowsPerChunk) {
      const b1 = Math.min(B!, b0 + rowsPerChunk);
      const rows = b1 - b0;
      const view = (t: ort.Tensor, dims: number[]) => {
        const per = dims.reduce((a, d) => a * d, 1);
        return rows === B ? t : new ort.Tensor('float32', (t.data as Float32Array).subarray(b0 * per, b1 * per), [rows, ...dims]);
      };
      const xs = view(x, [S!, E!]);
      const ms = view(layerMask, [1, S!, T]);
      const ks = view(buffers.k, [msg.heads, cap, msg.headDim]);
      const vs = view(buffers.v, [msg.heads, cap, msg.headDim]);
      // cos/sin rows are tokens (b·S + s): a row chunk's are contiguous too.
      const ropeFeeds: Record<string, ort.Tensor> = rope ? { cos: tokenRows(rope.cos, b0 * S!, b1 * S!), sin: tokenRows(rope.sin, b0 * S!, b1 * S!) } : {};
      let out: ort.Tensor;
      if (layer.sharedAs) {
        // A streamed layer's session concatenates past and new itself; the new K/V go into the cache afterwards.
        const r = await runSession({ key: layer.key, feeds: {}, shared: [], sharedAs: layer.sharedAs, fetch: ['y', 'new_k', 'new_v'] }, { x: xs, mask: ms, past_k: ks, past_v: vs, ...ropeFeeds });
        cache.write(index, b0, r.new_k!.data as Float32Array, r.new_v!.data as Float32Array, S!);
        out = r.y!;
      } else {
        const a = await runSession({ key: `${layer.key}.qkv`, feeds: {}, shared: [], fetch: ['q', 'k', 'v'] }, { x: xs, ...ropeFeeds });
        cache.write(index, b0, a.k!.data as Float32Array, a.v!.data as Float32Array, S!);
        // A first step (the prompt) attends over its own keys only: those exact tensors, not the buffers' headroom.
        const kv = empty ? { cache_k: a.k!, cache_v: a.v! } : { cache_k: ks, cache_v: vs };
        out = (await runSession({ key: `${layer.key}.rest`, feeds: {}, shared: [], fetch: ['y'] }, { x: xs, q: a.q!, mask: ms, ...kv })).y!;
      }
      if (y) y.set(out.data as Float32Array, b0 * S! * E!);
      else last = out;
    }
    cache.commit(index, S!);
    x = y ? new ort.Tensor('float32', y, [B!, S!, E!]) : last!;
  }
  // A scratch buffer stays here; the reply gets its own copy.
  return chunked ? new ort.Tensor('float32', (x.data as Float32Array).slice(), [B!, S!, E!]) : x;
}

/** Rows `from .. to - 1` of a `[rows, D]` tensor (a view). */
function tokenRows(t: ort.Tensor, from: number, to: number): ort.Tensor {
  const [rows, D] = t.dims as number[];
  return from === 0 && to === rows ? t : new ort.Tensor('float32', (t.data as Float32Array).subarray(from * D!, to * D!), [to - from, D!]);
}

/**
 * One resident layer with the past sent along and the present returned (the engine-held cache): the same two stages
 * as a worker-held cache step, attending over the present `[B, H, P + S, D]`.
 */
async function pastLayer(msg: PastLayer): Promise<Record<string, ort.Tensor>> {
  const x = toTensor(msg.x);
  const [B, S] = x.dims as number[];
  const rows = B! * msg.heads;
  const rope: Record<string, ort.Tensor> = msg.rope ? { cos: sharedTensor(msg.rope.cos), sin: sharedTensor(msg.rope.sin) } : {};
  const a = await runSession({ key: `${msg.key}.qkv`, feeds: {}, shared: [], fetch: ['q', 'k', 'v'] }, { x, ...rope });
  const T = msg.pastLen + S!;
  const dims = [B!, msg.heads, T, msg.headDim];
  const presentK = new ort.Tensor('float32', concatRows(msg.pastK, a.k!.data as Float32Array, rows, msg.headDim), dims);
  const presentV = new ort.Tensor('float32', concatRows(msg.pastV, a.v!.data as Float32Array, rows, msg.headDim), dims);
  const r = await runSession({ key: `${msg.key}.rest`, feeds: {}, shared: [], fetch: ['y'] }, { x, q: a.q!, cache_k: presentK, cache_v: presentV, mask: sharedTensor(msg.mask) });
  return { y: r.y!, present_k: presentK, present_v: presentV };
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
// Tells the client that onnxruntime's binding has loaded: a thread terminated while the binding initialises aborts
// the whole process, so the client waits for this before it terminates (see OrtWorkerClient.terminate).
parentPort!.postMessage({ ready: true } satisfies WorkerReady);
