import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '@flexhelm/engine';
import { OneDnnBackend, oneDnnStatus } from '@flexhelm/onednn-backend';
import { RequestCache } from '@flexhelm/request-cache';
import { constructRunSpecs, parseObjectSpec } from '@flexhelm/run-spec';
import { localOptWindowService, loadOptTokenizer, } from '@flexhelm/tokenizer';
import { readRunOutputs } from '@flexhelm/runner';
import { CachingExecutor } from '@flexhelm/runner';
import { EngineExecutor } from '@flexhelm/runner';
import type { RequestExecutor } from '@flexhelm/runner';
import { runOne } from '@flexhelm/runner';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

// The resume property on the oneDNN backend with dtype auto, each attempt with a freshly loaded engine as a new process
// would have: a run interrupted after some chunks and resumed writes the same files as an uninterrupted run. (auto
// decides on each process's first batch, which is a different chunk after a resume; that batch must be computed in the
// dtype kept, like every other. run-one.test.ts has the fp32 version, apps/cli's run.test.ts the SIGKILL one, which
// runs on oneDNN by default where it is available.)
const available = oneDnnStatus().available;
const root = mkdtempSync(join(tmpdir(), 'flexhelm-runner-onednn-'));
const modelDir = join(root, 'tiny-opt');
const engines: Engine[] = [];

beforeAll(async () => {
  if (!available) return;
  makeTinyOptModel(modelDir, 3);
}, 120_000);

afterAll(async () => {
  for (const e of engines) await e.close();
});

/** Executes through the cache; `killAfter` chunks makes the run die like a killed process (after committing them). */
async function setup(cachePath: string, killAfter?: number) {
  const engine = await Engine.load(modelDir, { backend: new OneDnnBackend({ dtype: 'auto', onNotice: () => {} }) });
  engines.push(engine);
  const tokenizer = loadOptTokenizer(modelDir);
  const inner = new EngineExecutor(engine, tokenizer, { modelId: 'tiny-opt-seed3/onednn', maxBatchSize: 2 });
  let calls = 0;
  const dying: RequestExecutor = {
    modelId: inner.modelId,
    execute: async (requests, onProgress) => {
      if (killAfter !== undefined && calls++ >= killAfter) throw new Error('killed');
      return inner.execute(requests, onProgress);
    },
  };
  const cache = RequestCache.open(cachePath);
  return { cache, executor: new CachingExecutor(dying, cache, 4), windowService: localOptWindowService(tokenizer) };
}

describe.skipIf(!available)('runOne on the oneDNN backend', () => {
  it('an interrupted and resumed run writes the same files as an uninterrupted one', async () => {
    const [runSpec] = constructRunSpecs(parseObjectSpec('synthetic_reasoning:mode=pattern_match,model=together/opt-66b'));
    runSpec!.adapter_spec.max_eval_instances = 12;
    runSpec!.adapter_spec.num_train_trials = 1;
    const fresh = await setup(join(root, 'fresh.sqlite'));
    const a = await runOne(runSpec!, { outputPath: join(root, 'out-fresh'), suite: 's', executor: fresh.executor, windowService: fresh.windowService });
    fresh.cache.close();

    const cachePath = join(root, 'resumed.sqlite');
    const killed = await setup(cachePath, 1);
    await expect(runOne(runSpec!, { outputPath: join(root, 'out-resumed'), suite: 's', executor: killed.executor, windowService: killed.windowService })).rejects.toThrow('killed');
    expect(killed.cache.count()).toBe(4);
    killed.cache.close();
    const resumed = await setup(cachePath);
    const b = await runOne(runSpec!, { outputPath: join(root, 'out-resumed'), suite: 's', executor: resumed.executor, windowService: resumed.windowService });
    resumed.cache.close();
    // Everything but wall-clock times: completions (text, tokens, logprobs) and every stat not derived from timing.
    const content = (dir: string) => {
      const o = readRunOutputs(dir);
      const timed = (name: string) => /runtime|batch_size/.test(name);
      return {
        completions: o.scenarioState.request_states.map((rs) => rs.result!.completions),
        stats: o.stats.filter((s) => !timed(s.name.name)),
        perInstance: o.perInstanceStats.map((p) => ({ ...p, stats: p.stats.filter((s) => !timed(s.name.name)) })),
      };
    };
    const expected = content(a.runDir);
    expect(expected.completions.every((c) => c[0]!.tokens.length > 0)).toBe(true);
    expect(content(b.runDir)).toEqual(expected);
    expect(readFileSync(join(b.runDir, 'run_spec.json'), 'utf8')).toBe(readFileSync(join(a.runDir, 'run_spec.json'), 'utf8'));
  }, 300_000);
});
