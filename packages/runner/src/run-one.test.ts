import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '@flexhelm/engine';
import { RequestCache } from '@flexhelm/request-cache';
import { constructRunSpecs, parseObjectSpec } from '@flexhelm/run-spec';
import { localOptWindowService, loadOptTokenizer, } from '@flexhelm/tokenizer';
import { readRunOutputs, RUN_OUTPUT_FILES } from './run-outputs.js';
import { CachingExecutor } from './caching-executor.js';
import { EngineExecutor } from './engine-executor.js';
import type { RequestExecutor } from './request-executor.js';
import { finishRun, prepareRun, runOne } from './run-one.js';
import { makeTinyOptModel } from './testing/index.js';
import { OrtBackend } from '@flexhelm/ort-backend';

const root = mkdtempSync(join(tmpdir(), 'flexhelm-runner-'));
const modelDir = join(root, 'tiny-opt');
let engine: Engine;

beforeAll(async () => {
  makeTinyOptModel(modelDir, 3);
  engine = await Engine.load(modelDir, { backend: new OrtBackend() });
}, 120_000);

afterAll(async () => {
  await engine?.close();
});

function setup(cachePath: string, spy?: { executed: number }) {
  const tokenizer = loadOptTokenizer(modelDir);
  const inner = new EngineExecutor(engine, tokenizer, { modelId: 'tiny-opt-seed3', maxBatchSize: 8 });
  const counting: RequestExecutor = {
    modelId: inner.modelId,
    execute: async (requests, onProgress) => {
      if (spy) spy.executed += requests.length;
      return inner.execute(requests, onProgress);
    },
  };
  const cache = RequestCache.open(cachePath);
  return { cache, executor: new CachingExecutor(counting, cache, 4), windowService: localOptWindowService(tokenizer) };
}

const description = 'synthetic_reasoning:mode=pattern_match,model=together/opt-66b';

describe('runOne on the OPT engine', () => {
  it('writes HELM’s five files with real results and every metric', async () => {
    const [runSpec] = constructRunSpecs(parseObjectSpec(description));
    runSpec!.adapter_spec.max_eval_instances = 6;
    runSpec!.adapter_spec.num_train_trials = 1;
    const { cache, executor, windowService } = setup(join(root, 'cache-a.sqlite'));
    const phases: string[] = [];
    const result = await runOne(runSpec!, {
      outputPath: join(root, 'out-a'),
      suite: 'test',
      executor,
      windowService,
      onEvent: (e) => phases.push(e.phase),
    });
    cache.close();
    expect(phases).toEqual(expect.arrayContaining(['instances', 'augmentation', 'adapt', 'execute', 'metrics', 'write', 'done']));
    expect(readdirSync(result.runDir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
    const outputs = readRunOutputs(result.runDir);
    expect(outputs.runSpec.name).toBe(runSpec!.name);
    expect(outputs.scenarioState.request_states).toHaveLength(6);
    for (const rs of outputs.scenarioState.request_states) {
      expect(rs.result?.success).toBe(true);
      const completion = rs.result!.completions[0];
      // Real logprobs: negative, finite, and the sequence logprob is the sum of its tokens'.
      for (const t of completion!.tokens) expect(t.logprob).toBeLessThanOrEqual(0);
      expect(completion!.logprob).toBeCloseTo(completion!.tokens.reduce((s, t) => s + t.logprob, 0), 9);
      expect(completion!.tokens.length).toBeLessThanOrEqual(runSpec!.adapter_spec.max_tokens);
    }
    const names = new Set(outputs.stats.map((s) => s.name.name));
    for (const n of ['exact_match', 'quasi_exact_match', 'num_prompt_tokens', 'num_output_tokens', 'num_train_instances']) expect(names).toContain(n);
    // the per-instance stats cover every eval instance
    expect(new Set(outputs.perInstanceStats.map((p) => p.instance_id)).size).toBe(6);
  });

  it('resumes from the request cache without recomputing, writing identical files', async () => {
    const [runSpec] = constructRunSpecs(parseObjectSpec(description));
    runSpec!.adapter_spec.max_eval_instances = 5;
    runSpec!.adapter_spec.num_train_trials = 1;
    const cachePath = join(root, 'cache-b.sqlite');
    const first = setup(cachePath, { executed: 0 });
    const a = await runOne(runSpec!, { outputPath: join(root, 'out-b1'), suite: 's', executor: first.executor, windowService: first.windowService });
    first.cache.close();
    const spy = { executed: 0 };
    const second = setup(cachePath, spy);
    const b = await runOne(runSpec!, { outputPath: join(root, 'out-b2'), suite: 's', executor: second.executor, windowService: second.windowService });
    second.cache.close();
    expect(spy.executed).toBe(0);
    for (const f of RUN_OUTPUT_FILES) {
      if (f === 'scenario.json') continue; // holds the output path, which differs on purpose here
      expect(readFileSync(join(b.runDir, f), 'utf8'), f).toBe(readFileSync(join(a.runDir, f), 'utf8'));
    }
  });

  it('prepareRun + finishRun with results computed elsewhere write the same files as runOne', async () => {
    const [runSpec] = constructRunSpecs(parseObjectSpec(description));
    runSpec!.adapter_spec.max_eval_instances = 5;
    runSpec!.adapter_spec.num_train_trials = 1;
    const { cache, executor, windowService } = setup(join(root, 'cache-b.sqlite'));
    const prepared = await prepareRun(runSpec!, { outputPath: join(root, 'out-b1'), suite: 'split', windowService });
    expect(prepared).toBeDefined();
    expect(prepared!.adapted.request_states.every((rs) => rs.result === undefined)).toBe(true);
    const results = await executor.execute(prepared!.adapted.request_states.map((rs) => rs.request));
    await expect(finishRun(prepared!, results.slice(1), { windowService })).rejects.toThrow(/4 results for 5 requests/);
    const r = await finishRun(prepared!, results, { windowService });
    cache.close();
    const reference = join(root, 'out-b1', 'runs', 's', runSpec!.name);
    for (const f of RUN_OUTPUT_FILES) expect(readFileSync(join(r.runDir, f), 'utf8'), f).toBe(readFileSync(join(reference, f), 'utf8'));
  });

  it('skips a completed run when asked', async () => {
    const [runSpec] = constructRunSpecs(parseObjectSpec(description));
    runSpec!.adapter_spec.max_eval_instances = 5;
    runSpec!.adapter_spec.num_train_trials = 1;
    const { cache, executor, windowService } = setup(join(root, 'cache-b.sqlite'));
    const r = await runOne(runSpec!, { outputPath: join(root, 'out-b1'), suite: 's', executor, windowService, skipCompleted: true });
    cache.close();
    expect(r.skipped).toBe(true);
  });
});
