import { Engine, jsLogitsMath, kvValuesPerToken, type ModelDescription, type DecoderBackend } from '@flexhelm/engine';
import { OffloadingBackend, parsePolicy, type Policy } from '@flexhelm/offload';
import { measured, microBatchBytes, type DecodeProbe, type Measured } from '@flexhelm/cost-model';

export interface DecodeProbeOptions {
  quick?: boolean;
  /** Where OffloadingBackend may put files (the probe's policies keep everything in RAM, but it wants a folder). */
  offloadDir?: string;
  /** The backend profile's embedding cost per row and worker round trip, taken out of each step to leave the layers. */
  embedMsPerRow: number;
  roundTripMs: number;
}

interface StepTimes {
  /** Per decoder layer (milliseconds), round trips, embedding and waits for weight loads taken out. */
  layer: Measured;
  logits: Measured;
  sampleMsPerRow: number;
  /** Mean context (cached tokens + 1) of the timed steps. */
  context: number;
}

/**
 * Decode steps through the engine as a run drives them, on a two-layer dummy model of the description's family and
 * shapes (`profileDescription`: its table may be cut, see `profileVocab`): the resident
 * path (backend-held KV cache) at a few batch sizes and a long context, and — where the backend can stream weights —
 * OffloadingBackend with every weight on the host tier the same way, plus one two-micro-batch block for the cost of
 * each further micro-batch.
 */
export async function profileDecode(d: ModelDescription, make: () => DecoderBackend, o: DecodeProbeOptions): Promise<DecodeProbe> {
  const quick = o.quick ?? false;
  const probeModel: ModelDescription = { ...d, name: `${d.name}-decode-probe`, layers: 2 };
  const c = { numHiddenLayers: probeModel.layers, maxPositionEmbeddings: d.maxPositions, vocabSize: d.vocabSize, hiddenSize: d.hiddenSize };
  // Resident steps take tens of milliseconds: enough of them that one noisy sample cannot set a batch size's cost
  // (two per point misread 16 rows 2× high). Streamed steps load the head each time (~1 s), so fewer.
  const directSteps = quick ? 8 : 10;
  const streamedSteps = quick ? 2 : 5;
  const steps = Math.max(directSteps, streamedSteps);
  const grid = quick ? [1, 4, 16] : [1, 2, 4, 8, 16, 32, 64];
  const shortPrompt = 4;
  const longPrompt = Math.min(quick ? 128 : 256, c.maxPositionEmbeddings - steps - 2);
  const slopeRows = 4;
  const perLayer = (stepMs: number, rows: number, requests: number) => Math.max(0, stepMs - requests * o.roundTripMs - o.embedMsPerRow * rows) / c.numHiddenLayers;

  /** Times `steps` decode steps (after one unmeasured) of a batch of `rows` after a prompt of `prompt` tokens. */
  const probe = async (engine: Engine, rows: number, prompt: number, requests: number, steps: number): Promise<StepTimes> => {
    const stats = (engine.backend as Partial<OffloadingBackend>).stats;
    const ids = Array.from({ length: rows }, (_, b) => Array.from({ length: prompt }, (_, s) => 4 + ((b * 131 + s * 17) % (c.vocabSize - 4))));
    const run = engine.startBatch(rows);
    const picks = (seq: number) => ids.map((_, row) => ({ row, pos: seq - 1 }));
    // Generation's per-row arithmetic, as generate takes it: the backend's own where it has one.
    const math = run.logitsMath ?? jsLogitsMath;
    try {
      await run.logits(await run.step(ids, ids.map((r) => r.map(() => 1))), prompt, picks(prompt));
      const layer: number[] = [];
      const logits: number[] = [];
      const sample: number[] = [];
      for (let r = 0; r <= steps; r++) {
        const stall0 = stats?.stallMs ?? 0;
        const t0 = performance.now();
        const hidden = await run.step(ids.map(() => [7]), ids.map(() => [1]));
        const t1 = performance.now();
        const stall1 = stats?.stallMs ?? 0;
        const l = await run.logits(hidden, 1, picks(1));
        const t2 = performance.now();
        // A streamed head's wait for its load is predicted from the load itself.
        const headStall = (stats?.stallMs ?? 0) - stall1;
        for (let b = 0; b < rows; b++) {
          const row = l.subarray(b * c.vocabSize, (b + 1) * c.vocabSize);
          math.argmax(row);
          math.logSumExp(row);
        }
        const t3 = performance.now();
        if (r === 0) continue;
        layer.push(perLayer(t1 - t0 - (stall1 - stall0), rows, requests));
        logits.push(t2 - t1 - headStall);
        sample.push((t3 - t2) / rows);
      }
      return { layer: measured(layer), logits: measured(logits), sampleMsPerRow: measured(sample).median, context: prompt + 1 + (1 + steps) / 2 };
    } finally {
      await run.close();
    }
  };

  const sweep = async (backend: DecoderBackend, requests: number, steps: number, rowsGrid = grid) => {
    const engine = await Engine.dummy(probeModel, { backend, seed: 5 });
    try {
      const short: StepTimes[] = [];
      for (const rows of rowsGrid) short.push(await probe(engine, rows, shortPrompt, requests, steps));
      const long = await probe(engine, slopeRows, longPrompt, requests, steps);
      const at = short[rowsGrid.indexOf(slopeRows)]!;
      const slope = Math.max(0, long.layer.median - at.layer.median) / (slopeRows * (long.context - at.context));
      return { short, long, slope };
    } finally {
      await engine.close();
    }
  };

  // Resident: one worker request per step (embedding and every layer against the backend-held cache).
  const first = make();
  const canStream = Boolean(first.streamedLayers);
  const direct = await sweep(first, 1, directSteps);
  const result: DecodeProbe = {
    rows: grid,
    context: direct.short[0]!.context,
    directLayerMs: direct.short.map((s) => s.layer),
    directMsPerRowToken: direct.slope,
    logitsMs: direct.short.map((s) => s.logits),
    sampleMsPerRow: measured(direct.short.map((s) => s.sampleMsPerRow)).median,
  };

  if (!canStream) return result;
  const hostPolicy = (gpuBatchSize: number, numGpuBatches: number): Policy =>
    parsePolicy({ gpuBatchSize, numGpuBatches, wGpuPercent: 0, wCpuPercent: 100, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0 });
  const offload = { offloadDir: o.offloadDir };
  // Streamed, one micro-batch per step: a setStep request and the embedding's, then per layer the hand-over and the call.
  // Streamed steps are slow (a streamed head loads every step), so the quick profile times fewer batch sizes.
  const streamedRows = quick ? grid.filter((r) => r >= slopeRows) : grid;
  // The weights hand-over timed where it happens: in a run it costs far more than alone (fresh memory in the worker).
  const handOver: number[] = [];
  const timed = (backend: DecoderBackend): DecoderBackend => {
    const streaming = backend.streamedLayers!;
    const set = streaming.setLayer.bind(streaming);
    // Every argument passes through: a mixture of experts' layer comes without its experts and with their source.
    streaming.setLayer = async (...call) => {
      const t0 = performance.now();
      await set(...call);
      handOver.push(performance.now() - t0);
    };
    return backend;
  };
  const streamed = await sweep(new OffloadingBackend(timed(make()), hostPolicy(grid[grid.length - 1]!, 1), offload), 2, streamedSteps, streamedRows);
  result.handOverMs = measured(handOver);
  result.streamedRows = streamedRows;
  result.streamedLayerMs = streamed.short.map((s) => s.layer);
  result.streamedLogitsMs = streamed.short.map((s) => s.logits);
  result.streamedMsPerRowToken = streamed.slope;

  // Two micro-batches of `slopeRows` at the long context: against one of them, the second costs a setStep request,
  // its layer call and the copies of its rows.
  const engine = await Engine.dummy(probeModel, { backend: new OffloadingBackend(make(), hostPolicy(slopeRows, 2), offload), seed: 5 });
  try {
    const two = await probe(engine, 2 * slopeRows, longPrompt, 1, streamedSteps);
    const setW = result.handOverMs.median;
    const call = Math.max(0, streamed.long.layer.median - setW);
    // two = setW + 2 · (round trip + call + copies)
    const copies = Math.max(0, (two.layer.median - setW) / 2 - o.roundTripMs - call);
    result.microBatchMsPerByte = copies / microBatchBytes(slopeRows, two.context - 1, c.hiddenSize, kvValuesPerToken(d) / 2);
  } finally {
    await engine.close();
  }
  return result;
}
