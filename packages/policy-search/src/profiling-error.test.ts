import { describe, expect, it } from 'vitest';
import { Engine } from '@flexhelm/engine';
import { profilingError, ProfilingError } from './profiling-error.js';

describe('profilingError', () => {
  it("turns an engine's failure into one line naming the shape, the cause and how to go on", async () => {
    // A real setup failure: heads that do not divide the hidden size.
    const failure = await Engine.dummy({ name: 'bad', hiddenSize: 30, ffnDim: 64, numAttentionHeads: 4, numHiddenLayers: 1, vocabSize: 50, maxPositionEmbeddings: 32 } as never, { backend: 'reference' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(Error);
    const e = profilingError("llama-8b's shapes (hidden 30, vocabulary 50)", failure);
    expect(e).toBeInstanceOf(ProfilingError);
    expect(e.message).not.toContain('\n');
    expect(e.message).toMatch(/^profiling llama-8b's shapes \(hidden 30, vocabulary 50\) for --percent auto failed: .+\. Give the policy explicitly instead \(e\.g\. --percent 0 0 100 0 100 0/);
    expect(e.message).toContain((failure as Error).message.split('\n')[0]);
    // Kept as is when already wrapped (no double prefix).
    expect(profilingError('other', e)).toBe(e);
  });

  it('keeps only the first line of a multi-line cause (onnxruntime appends its stack)', () => {
    const e = profilingError('x', new Error('Model data size exceeds maximum supported size (2GB)\n    at Session.create (worker.js:1:1)'));
    expect(e.message).toBe('profiling x for --percent auto failed: Model data size exceeds maximum supported size (2GB). Give the policy explicitly instead (e.g. --percent 0 0 100 0 100 0 keeps the weights on disk)');
  });
});
