// One measured run of a policy on a dummy model: FlexLLMGen's benchmark loop (warm-up, one prefill of the block,
// genLen − 1 decode steps, each row's logits reduced as generation does) through the engine path `flexhelm run` takes.
// Run as a child process (`node run-policy.js --one`, the spec as JSON on stdin) so its peak RSS is its own: the profile's
// calibration runs and the benchmark's measured runs both come through here.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, ReferenceBackend, UnsupportedKindsError, descriptionByName, jsLogitsMath, type ModelDescription, type DecoderBackend } from '@flexhelm/engine';
import { OrtBackend } from '@flexhelm/ort-backend';
import { OffloadingBackend, parsePolicy, type Policy } from '@flexhelm/offload';

export interface RunSpec {
  /** An OPT model name known to the engine (`description` wins). */
  model?: string;
  /** Any family's description: its own layers are run. */
  description?: ModelDescription;
  policy: Policy;
  promptLen: number;
  genLen: number;
  offloadDir: string;
  /** Decoder layers of the dummy model (default: the model's own). */
  layers?: number;
  /** Compute backend (default onnxruntime fp32). */
  backend?: 'onnxruntime-fp32' | 'onednn-bf16';
}

export interface RunResult {
  prefillMs: number;
  decodeStepMs: number;
  totalMs: number;
  throughput: number;
  /** VmHWM of the process. */
  peakRssBytes: number;
  stats?: Record<string, number>;
}

async function makeBackend(name: RunSpec['backend']): Promise<DecoderBackend> {
  if (name === 'onednn-bf16') {
    const { OneDnnBackend } = await import('@flexhelm/onednn-backend');
    return new OneDnnBackend({ dtype: 'bf16' });
  }
  return new OrtBackend();
}

/** Measures `spec` in this process (its peak RSS is this process's). */
export async function runPolicyHere(spec: RunSpec): Promise<RunResult> {
  if (!spec.description && !spec.model) throw new Error('runPolicy: give a model name or a description');
  const described = spec.description ?? descriptionByName(spec.model!);
  const config: ModelDescription = { ...described, ...(spec.layers ? { layers: spec.layers } : {}) };
  const policy = parsePolicy(spec.policy);
  const direct = policy.wGpuPercent === 100 && !policy.compressWeight;
  const open = async (inner: DecoderBackend) => Engine.dummy(config, { backend: direct ? inner : new OffloadingBackend(inner, policy, { offloadDir: spec.offloadDir }), seed: 1 });
  let engine: Engine;
  try {
    engine = await open(await makeBackend(spec.backend));
  } catch (err) {
    // As the session does (and the profile timed): a family onnxruntime does not compute yet runs on the reference backend.
    if (!(err instanceof UnsupportedKindsError) || err.backend !== 'onnxruntime') throw err;
    engine = await open(new ReferenceBackend());
  }
  const backend = engine.backend;
  const B = policy.gpuBatchSize * policy.numGpuBatches;
  const V = config.vocabSize;
  const block = async (promptLen: number, genLen: number) => {
    const ids = Array.from({ length: B }, (_, b) => Array.from({ length: promptLen }, (_, s) => 4 + ((b * 131 + s * 17) % Math.min(5000, V - 4))));
    const run = engine.startBatch(B);
    const picks = (seq: number) => ids.map((_, row) => ({ row, pos: seq - 1 }));
    // What generation does with each row's logits: the greedy token and the log-sum-exp for its logprob (with the
    // backend's own arithmetic where it has one, as generate does).
    const math = run.logitsMath ?? jsLogitsMath;
    const pick = (logits: Float32Array) => {
      for (let b = 0; b < B; b++) {
        const row = logits.subarray(b * V, (b + 1) * V);
        math.argmax(row);
        math.logSumExp(row);
      }
    };
    const t0 = performance.now();
    pick(await run.logits(await run.step(ids, ids.map((r) => r.map(() => 1))), promptLen, picks(promptLen)));
    const prefillMs = performance.now() - t0;
    const t1 = performance.now();
    for (let t = 1; t < genLen; t++) pick(await run.logits(await run.step(ids.map(() => [7]), ids.map(() => [1])), 1, picks(1)));
    const decodeMs = performance.now() - t1;
    // The warm-up's cache is released before the measured block, as a run's batches follow one another.
    await run.close();
    return { prefillMs, decodeMs };
  };
  // Warm-up at the measured shape: onnxruntime grows each session's arenas and this VM pays for first-touched memory on
  // the first run of a shape; a HELM run's batches repeat their shapes, so the steady state is what the model predicts.
  await block(spec.promptLen, 2);
  const stats = (backend as Partial<OffloadingBackend>).stats as Record<string, number> | undefined;
  const stats0 = stats ? { ...stats } : undefined;
  const { prefillMs, decodeMs } = await block(spec.promptLen, spec.genLen);
  const delta = stats && stats0 ? Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v - stats0[k]!])) : undefined;
  await engine.close();
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  const decodeSteps = Math.max(1, spec.genLen - 1);
  return {
    prefillMs,
    decodeStepMs: decodeMs / decodeSteps,
    totalMs: prefillMs + decodeMs,
    throughput: (B * spec.genLen) / ((prefillMs + decodeMs) / 1000),
    peakRssBytes: hwm ? Number(hwm) * 1024 : process.resourceUsage().maxRSS * 1024,
    ...(delta ? { stats: delta } : {}),
  };
}

/** This file as built (from the sources, as tests run them, the copy in ../dist). */
export function runPolicyScript(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return existsSync(join(here, 'run-policy.js')) ? join(here, 'run-policy.js') : join(here, '..', 'dist', 'run-policy.js');
}

/** Measures `spec` in a fresh process (clean peak RSS); throws with the child's last error line when it fails. */
export function runPolicy(spec: RunSpec): RunResult {
  // The spec goes through stdin, not argv: a description is tens of kilobytes, and onnxruntime 1.30's environment
  // set-up recurses until the stack overflows (SIGSEGV) in a process started with an argument that long.
  const r = spawnSync(process.execPath, [runPolicyScript(), '--one'], { input: JSON.stringify(spec), encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) {
    const lines = (r.stderr ?? '').trim().split('\n');
    // The thrown error's line, not Node's version footer.
    const why = lines.find((l) => /Error\b/.test(l)) ?? lines.pop() ?? '';
    throw new Error(`measured run of ${spec.description?.name ?? spec.model} (${spec.policy.wGpuPercent} ${spec.policy.wCpuPercent} · ${spec.policy.gpuBatchSize}×${spec.policy.numGpuBatches}) failed (${r.status === null ? `killed by ${r.signal}` : `exit ${r.status}`}): ${why}`);
  }
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as RunResult;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && process.argv[2] === '--one') {
  const result = await runPolicyHere(JSON.parse(readFileSync(0, 'utf8')) as RunSpec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
