import { encodeModel, GraphBuilder, OnnxType, OPSET } from './onnx-writer.js';
import { OrtWorkerClient, transferable } from './ort-worker-client.js';

export interface MatMulShape {
  m: number;
  k: number;
  n: number;
}

/**
 * onnxruntime's fp32 MatMul speed on this machine for `[m, k]·[k, n]` with B as a prepacked initializer (as the
 * engine's layers hold their weights), in the same kind of worker the engine uses. Returns GFLOP/s over all shapes
 * (total FLOPs / total median time), i.e. the roofline the engine's GEMMs can reach.
 *
 * Only the first row of each product leaves onnxruntime, so the time is the GEMM's and not that of copying a large
 * output into new JS memory (inside a layer the products stay in onnxruntime's arena too); the first two runs of each
 * shape, which grow that arena, are not timed.
 */
export async function measureMatMulGflops(shapes: MatMulShape[], options: { repeats?: number; intraOpNumThreads?: number } = {}): Promise<number> {
  const client = new OrtWorkerClient(options.intraOpNumThreads);
  try {
    let flops = 0;
    let seconds = 0;
    for (const [i, { m, k, n }] of shapes.entries()) {
      const g = new GraphBuilder();
      const w = new Float32Array(k * n);
      for (let j = 0; j < w.length; j++) w[j] = ((j * 7919) % 1000) / 1000 - 0.5;
      g.floatTensor('w', w, [k, n]);
      const product = g.op('MatMul', ['a', 'w']);
      g.op('Slice', [product, g.constInt64('start', [0]), g.constInt64('end', [1]), g.constInt64('axis', [0])], undefined, 'y');
      const model = encodeModel({
        graphName: 'matmul',
        nodes: g.nodes,
        initializers: g.initializers,
        inputs: [{ name: 'a', type: OnnxType.FLOAT, dims: [m, k] }],
        outputs: [{ name: 'y', type: OnnxType.FLOAT, dims: [1, n] }],
        opset: OPSET,
      });
      const key = `mm${i}`;
      await client.request({ kind: 'create', key, model }, [model.buffer as ArrayBuffer]);
      // The input stays in the worker (a shared tensor), so no run pays for sending it.
      const a = new Float32Array(m * k).fill(0.25);
      await client.request({ kind: 'setShared', name: 'a', tensor: { type: 'float32', data: a, dims: [m, k] } }, transferable(a));
      const times: number[] = [];
      const warmup = 2;
      for (let r = 0; r < (options.repeats ?? 5) + warmup; r++) {
        const t0 = performance.now();
        await client.request({ kind: 'run', key, shared: ['a'], feeds: {} });
        if (r >= warmup) times.push(performance.now() - t0);
      }
      await client.request({ kind: 'release', key });
      times.sort((x, y) => x - y);
      seconds += times[Math.floor(times.length / 2)]! / 1000;
      flops += 2 * m * k * n;
    }
    return flops / seconds / 1e9;
  } finally {
    await client.terminate();
  }
}
