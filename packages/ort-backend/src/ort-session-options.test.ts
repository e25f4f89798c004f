import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { encodeModel, GraphBuilder, OnnxType } from './onnx-writer.js';
import { ortSessionOptions } from './ort-session-options.js';

describe('ortSessionOptions', () => {
  it('turns intra-op spinning off (one thread pool per session: idle pools spun on the cores the next layer needed)', () => {
    expect(ortSessionOptions().extra).toEqual({ session: { intra_op: { allow_spinning: '0' } } });
    expect(ortSessionOptions()).toMatchObject({ graphOptimizationLevel: 'all', executionMode: 'sequential', enableMemPattern: false });
    expect(ortSessionOptions({ intraOpNumThreads: 2, executionProviders: ['cpu'] })).toMatchObject({ intraOpNumThreads: 2, executionProviders: ['cpu'] });
    expect(ortSessionOptions()).not.toHaveProperty('intraOpNumThreads');
  });

  it('are accepted by onnxruntime: a session made with them computes a MatMul exactly', async () => {
    const g = new GraphBuilder();
    g.floatTensor('w', Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]);
    g.op('MatMul', ['x', 'w'], undefined, 'y');
    const model = encodeModel({
      graphName: 'm',
      nodes: g.nodes,
      initializers: g.initializers,
      inputs: [{ name: 'x', type: OnnxType.FLOAT, dims: ['N', 2] }],
      outputs: [{ name: 'y', type: OnnxType.FLOAT, dims: ['N', 3] }],
      opset: 17,
    });
    const session = await ort.InferenceSession.create(model, ortSessionOptions({ intraOpNumThreads: 2 }));
    try {
      const out = await session.run({ x: new ort.Tensor('float32', Float32Array.from([1, 1, 2, -1]), [2, 2]) });
      expect([...(out.y!.data as Float32Array)]).toEqual([5, 7, 9, -2, -1, 0]);
    } finally {
      await session.release();
    }
  });
});
