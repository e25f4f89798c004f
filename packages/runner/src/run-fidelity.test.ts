import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestResult, RequestState } from '@flexhelm/core';
import { Engine, SafetensorsSource, writeSafetensors } from '@flexhelm/engine';
import { RequestCache, requestKey } from '@flexhelm/request-cache';
import { constructRunSpecs, parseObjectSpec } from '@flexhelm/run-spec';
import { loadOptTokenizer, localOptWindowService } from '@flexhelm/tokenizer';
import { CachingExecutor } from './caching-executor.js';
import { EngineExecutor } from './engine-executor.js';
import type { RequestExecutor } from './request-executor.js';
import { runOne } from './run-one.js';
import { readRunOutputs } from './run-outputs.js';
import { makeTinyOptModel } from './testing/index.js';

// Fidelity details found by comparing flexhelm's files with HELM 0.2.1's own runner (issue #21): batch fields,
// repeated requests served from the cache, and stop sequences that actually fire.

const root = mkdtempSync(join(tmpdir(), 'flexhelm-fidelity-'));

/**
 * A tiny OPT whose greedy output is scripted by position: every layer's output projections are zeroed (each layer
 * passes the residual through), and position p's learned embedding is a large multiple of token `script[p % k]`'s
 * (enlarged) embedding, so the final LayerNorm sees that token's direction and the tied head picks it. The token
 * generated after the token at position p is therefore `script[p % k]`, whatever the prompt says.
 */
function makeScriptedOptModel(dir: string, script: number[]): void {
  makeTinyOptModel(dir, 5);
  const path = join(dir, 'model.safetensors');
  const source = new SafetensorsSource(path);
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, info] of source.tensors) tensors.set(name, { shape: info.shape, data: source.read(name) });
  source.close();
  const embed = tensors.get('model.decoder.embed_tokens.weight')!;
  const positions = tensors.get('model.decoder.embed_positions.weight')!;
  const E = embed.shape[1]!;
  for (const id of new Set(script)) for (let i = 0; i < E; i++) embed.data[id * E + i]! *= 4;
  const rows = positions.shape[0]!;
  for (let row = 2; row < rows; row++) {
    const target = script[(row - 2) % script.length]!;
    for (let i = 0; i < E; i++) positions.data[row * E + i] = 50 * embed.data[target * E + i]!;
  }
  for (const [name, t] of tensors) {
    if (/(out_proj|fc2)\.(weight|bias)$/.test(name)) t.data.fill(0);
    if (name === 'model.decoder.final_layer_norm.weight') t.data.fill(1);
    if (name === 'model.decoder.final_layer_norm.bias') t.data.fill(0);
  }
  writeSafetensors(path, [...tensors].map(([name, t]) => ({ name, shape: t.shape, dtype: 'F32', data: t.data })));
}

function executorFor(engine: Engine, modelDir: string, cachePath: string, spy: { executed: number }) {
  const tokenizer = loadOptTokenizer(modelDir);
  const inner = new EngineExecutor(engine, tokenizer, { modelId: `fidelity/${modelDir}`, maxBatchSize: 4 });
  const counting: RequestExecutor = {
    modelId: inner.modelId,
    execute: async (requests, onProgress) => {
      spy.executed += requests.length;
      return inner.execute(requests, onProgress);
    },
  };
  const cache = RequestCache.open(cachePath);
  return { tokenizer, cache, executor: new CachingExecutor(counting, cache, 8), windowService: localOptWindowService(tokenizer) };
}

describe('repeated requests and batch fields', () => {
  const modelDir = join(root, 'tiny');
  let engine: Engine;
  beforeAll(async () => {
    makeTinyOptModel(modelDir, 3);
    engine = await Engine.load(modelDir, { backend: 'reference' });
  }, 120_000);
  afterAll(async () => engine?.close());

  it('serves a request repeated within a run from the cache, as HELM does, and computes it once', async () => {
    // With three trials (helm-run --num-train-trials 3), dyck_language's third trial repeats the second's prompts.
    const [runSpec] = constructRunSpecs(parseObjectSpec('dyck_language:num_parenthesis_pairs=2,model=together/opt-66b'));
    runSpec!.adapter_spec.max_eval_instances = 3;
    runSpec!.adapter_spec.num_train_trials = 3;
    runSpec!.adapter_spec.max_tokens = 3;
    const spy = { executed: 0 };
    const { cache, executor, windowService } = executorFor(engine, modelDir, join(root, 'dyck.sqlite'), spy);
    const result = await runOne(runSpec!, { outputPath: join(root, 'out-dyck'), suite: 's', executor, windowService });
    cache.close();
    const states = readRunOutputs(result.runDir).scenarioState.request_states;
    const first = new Map<string, RequestState>();
    let repeats = 0;
    for (const rs of states) {
      const key = requestKey('', rs.request);
      const earlier = first.get(key);
      if (earlier) {
        repeats++;
        expect(rs.result!.cached).toBe(true);
        expect({ ...rs.result!, cached: false }).toEqual(earlier.result);
      } else {
        first.set(key, rs);
        expect(rs.result!.cached).toBe(false);
      }
    }
    expect(states.length).toBe(9);
    expect(repeats).toBe(3);
    expect(spy.executed).toBe(first.size);
  }, 300_000);

  it('reports the forward batch each request rode in: batch_size rows, batch_request_time its wall time', async () => {
    const [runSpec] = constructRunSpecs(parseObjectSpec('synthetic_reasoning:mode=pattern_match,model=together/opt-66b'));
    runSpec!.adapter_spec.max_eval_instances = 6;
    runSpec!.adapter_spec.num_train_trials = 1;
    runSpec!.adapter_spec.max_tokens = 2;
    const { cache, executor, windowService } = executorFor(engine, modelDir, join(root, 'batch.sqlite'), { executed: 0 });
    const before = Math.floor(Date.now() / 1000);
    const result = await runOne(runSpec!, { outputPath: join(root, 'out-batch'), suite: 's', executor, windowService });
    const after = Math.floor(Date.now() / 1000);
    cache.close();
    const outputs = readRunOutputs(result.runDir);
    const results = outputs.scenarioState.request_states.map((rs) => rs.result as RequestResult);
    // HELM's wrap_request_time: request_datetime = int(start_time), a whole Unix second written as an int.
    for (const r of results) {
      expect(Number.isInteger(r.request_datetime)).toBe(true);
      expect(r.request_datetime!).toBeGreaterThanOrEqual(before);
      expect(r.request_datetime!).toBeLessThanOrEqual(after);
    }
    const raw = readFileSync(join(result.runDir, 'scenario_state.json'), 'utf8');
    expect(raw.match(/"request_datetime": \d+,\n/g)?.length).toBe(results.length);
    // 6 single-completion requests in batches of at most 4 rows: one batch of 4 and one of 2.
    const sizes = results.map((r) => r.batch_size!).sort();
    expect(sizes).toEqual([2, 2, 4, 4, 4, 4]);
    for (const r of results) {
      expect(r.batch_request_time!).toBeGreaterThan(0);
      // One completion per request: its share is the batch time divided by the batch's rows.
      expect(r.request_time! * r.batch_size!).toBeCloseTo(r.batch_request_time!, 9);
    }
    // HELM's efficiency metrics read the batch fields: inference_runtime is the batch time, the denoised runtime the
    // time per sequence, batch_size the rows.
    for (const split of ['test', 'valid']) {
      const inSplit = outputs.scenarioState.request_states.filter((rs) => rs.instance.split === split).map((rs) => rs.result!);
      expect(inSplit.length).toBeGreaterThan(0);
      const mean = (f: (r: RequestResult) => number) => inSplit.reduce((s, r) => s + f(r), 0) / inSplit.length;
      const stat = (name: string) => outputs.stats.find((s) => s.name.name === name && s.name.split === split && !s.name.perturbation)!;
      expect(stat('batch_size').mean).toBeCloseTo(mean((r) => r.batch_size!), 9);
      expect(stat('inference_runtime').mean).toBeCloseTo(mean((r) => r.batch_request_time!), 9);
      expect(stat('inference_denoised_runtime').mean).toBeCloseTo(mean((r) => r.batch_request_time! / r.batch_size!), 9);
    }
  }, 300_000);
});

describe('stop sequences and end of text that fire', () => {
  it('cuts completions as HELM 0.2.1’s truncate_sequence does when the model emits "\\n"', async () => {
    const modelDir = join(root, 'scripted-newline');
    const tokenizer0 = (() => {
      makeTinyOptModel(join(root, 'tokenizer-only'), 0);
      return loadOptTokenizer(join(root, 'tokenizer-only'));
    })();
    // " the answer" then a newline, then more words: greedy decoding runs into "\n" within four tokens.
    const script = [...tokenizer0.encode(' the answer'), ...tokenizer0.encode('\n'), ...tokenizer0.encode(' more')].map(Number);
    makeScriptedOptModel(modelDir, script);
    const engine = await Engine.load(modelDir, { backend: 'reference' });
    try {
      const [runSpec] = constructRunSpecs(parseObjectSpec('synthetic_reasoning:mode=pattern_match,model=together/opt-66b'));
      runSpec!.adapter_spec.max_eval_instances = 4;
      runSpec!.adapter_spec.num_train_trials = 1;
      expect(runSpec!.adapter_spec.stop_sequences).toEqual(['\n']);
      const { tokenizer, cache, executor, windowService } = executorFor(engine, modelDir, join(root, 'stop.sqlite'), { executed: 0 });
      const result = await runOne(runSpec!, { outputPath: join(root, 'out-stop'), suite: 's', executor, windowService });
      cache.close();
      const states = readRunOutputs(result.runDir).scenarioState.request_states;
      expect(states.length).toBe(4);
      for (const rs of states) {
        const completion = rs.result!.completions[0]!;
        // The raw greedy output: the prompt (with the BOS the executor adds) ends at position L - 1.
        const L = tokenizer.encode(rs.request.prompt).length + 1;
        const raw: string[] = [];
        for (let i = 0; i < rs.request.max_tokens; i++) raw.push(tokenizer.decode([script[(L - 1 + i) % script.length]!]));
        // HELM 0.2.1's truncate_sequence, written out independently: the text up to the first "\n"; the tokens up
        // to the first one whose text starts with "\n"; the logprob their sum; no finish reason after a cut.
        const rawText = raw.join('');
        const expectedText = rawText.slice(0, rawText.indexOf('\n'));
        const cut = raw.findIndex((t) => t.startsWith('\n'));
        expect(rawText).toContain('\n');
        expect(completion.text).toBe(expectedText);
        expect(completion.tokens.map((t) => t.text)).toEqual(raw.slice(0, cut));
        expect(completion.logprob).toBeCloseTo(completion.tokens.reduce((s, t) => s + t.logprob, 0), 12);
        expect(completion.finish_reason).toBeUndefined();
        // The engine stopped generating at the stop sequence instead of running to max_tokens.
        expect(completion.tokens.length).toBeLessThan(rs.request.max_tokens);
      }
    } finally {
      await engine.close();
    }
  }, 300_000);

  it('ends a completion at </s> with the text up to it', async () => {
    const modelDir = join(root, 'scripted-eos');
    const tokenizer0 = loadOptTokenizer(join(root, 'tokenizer-only'));
    const eos = 2;
    const script = [...tokenizer0.encode(' yes').map(Number), eos];
    makeScriptedOptModel(modelDir, script);
    const engine = await Engine.load(modelDir, { backend: 'reference' });
    try {
      const [runSpec] = constructRunSpecs(parseObjectSpec('synthetic_reasoning:mode=pattern_match,model=together/opt-66b'));
      runSpec!.adapter_spec.max_eval_instances = 3;
      runSpec!.adapter_spec.num_train_trials = 1;
      const { tokenizer, cache, executor, windowService } = executorFor(engine, modelDir, join(root, 'eos.sqlite'), { executed: 0 });
      const result = await runOne(runSpec!, { outputPath: join(root, 'out-eos'), suite: 's', executor, windowService });
      cache.close();
      for (const rs of readRunOutputs(result.runDir).scenarioState.request_states) {
        const completion = rs.result!.completions[0]!;
        const L = tokenizer.encode(rs.request.prompt).length + 1;
        const raw: number[] = [];
        for (let i = 0; i < rs.request.max_tokens; i++) {
          const id = script[(L - 1 + i) % script.length]!;
          raw.push(id);
          if (id === eos) break;
        }
        // Generation ends at </s> (kept as the last token, as the engine returns it); the text is the tokens' texts.
        expect(raw.at(-1)).toBe(eos);
        expect(completion.tokens.map((t) => t.text)).toEqual(raw.map((id) => tokenizer.decode([id])));
        expect(completion.text).toBe(completion.tokens.map((t) => t.text).join(''));
        expect(completion.tokens.length).toBeLessThanOrEqual(2);
      }
    } finally {
      await engine.close();
    }
  }, 300_000);
});
