// One measured run of a policy on a dummy model, in its own process (clean peak RSS): FlexLLMGen's benchmark loop
// (warm-up, one prefill of the block, genLen − 1 decode steps, each row's logits reduced as generation does), through
// the engine path `flexhelm run` takes.
import { readFileSync } from 'node:fs';

export async function runPolicy(spec) {
  const { OptEngine, OrtBackend, optConfigByName, argmax, logSumExp } = await import('@flexhelm/engine');
  const { OffloadingBackend, parsePolicy } = await import('@flexhelm/offload');
  const config = { ...optConfigByName(spec.model), ...(spec.layers ? { numHiddenLayers: spec.layers } : {}) };
  const policy = parsePolicy(spec.policy);
  const direct = policy.wGpuPercent === 100 && !policy.compressWeight;
  const backend = direct ? new OrtBackend() : new OffloadingBackend(new OrtBackend(), policy, { offloadDir: spec.offloadDir });
  const engine = await OptEngine.dummy(config, { backend, seed: 1 });
  const B = policy.gpuBatchSize * policy.numGpuBatches;
  const block = async (promptLen, genLen) => {
    const ids = Array.from({ length: B }, (_, b) => Array.from({ length: promptLen }, (_, s) => 4 + ((b * 131 + s * 17) % 5000)));
    const run = engine.startBatch(B);
    const last = (seq) => ids.map((_, row) => ({ row, pos: seq - 1 }));
    // What generation does with each row's logits: the greedy token and the log-sum-exp for its logprob.
    const pick = (logits) => {
      for (let b = 0; b < B; b++) {
        const row = logits.subarray(b * config.vocabSize, (b + 1) * config.vocabSize);
        argmax(row);
        logSumExp(row);
      }
    };
    const t0 = performance.now();
    pick(await run.logits(await run.step(ids, ids.map((r) => r.map(() => 1))), promptLen, last(promptLen)));
    const prefillMs = performance.now() - t0;
    const t1 = performance.now();
    for (let t = 1; t < genLen; t++) pick(await run.logits(await run.step(ids.map(() => [7]), ids.map(() => [1])), 1, last(1)));
    return { prefillMs, decodeMs: performance.now() - t1 };
  };
  // Warm-up at the measured shape: onnxruntime grows each session's arenas and this VM pays for first-touched memory on
  // the first run of a shape; a HELM run's batches repeat their shapes, so the steady state is what the model predicts.
  await block(spec.promptLen, 2);
  const stats0 = backend.stats ? { ...backend.stats } : undefined;
  const { prefillMs, decodeMs } = await block(spec.promptLen, spec.genLen);
  const stats = stats0 ? Object.fromEntries(Object.entries(backend.stats).map(([k, v]) => [k, v - stats0[k]])) : undefined;
  await engine.close();
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  const decodeSteps = Math.max(1, spec.genLen - 1);
  return {
    prefillMs,
    decodeStepMs: decodeMs / decodeSteps,
    totalMs: prefillMs + decodeMs,
    throughput: (B * spec.genLen) / ((prefillMs + decodeMs) / 1000),
    peakRssBytes: hwm ? Number(hwm) * 1024 : process.resourceUsage().maxRSS * 1024,
    stats,
  };
}

if (process.argv[2] === '--one') {
  const result = await runPolicy(JSON.parse(process.argv[3]));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
