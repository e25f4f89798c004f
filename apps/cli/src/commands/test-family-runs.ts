// Test helper (not built): the default path of a newcomer, for every family `make-model` knows, split over three test
// files so they run beside the rest of the suite. `flexhelm run` without --percent (auto: the machine profile is
// measured and written), then again (the profile is read from the cache: the cost model and the drift monitor must
// key it by the same family-aware shape as the search did); then `flexhelm serve` on the same folder.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RUN_OUTPUT_FILES } from '@flexhelm/runner';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export function flexhelm(args: string[], timeout = 300_000) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// One tiny model per family (2 layers, hidden 64, the family's attention and MLP: GQA, SwiGLU, QKV bias, sliding window).
export const FAMILY_FOLDERS: Record<string, string> = {
  opt: '{"base":"opt-125m","hiddenSize":64,"numHiddenLayers":2,"numAttentionHeads":4,"ffnDim":128}',
  llama: '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}',
  mistral: '{"base":"mistral-7b-v0.1","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":1,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024,"sliding_window":64}',
  qwen2: '{"base":"qwen2-0.5b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}',
  // Instruct folders ("chat": the family's template and end-of-turn tokens): Gemma 2's soft-caps, sandwich norms and
  // GeGLU; Phi-3's fused projections and window; OLMo 2's q/k norms and post-branch norms.
  gemma2: '{"base":"gemma-2-2b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024,"chat":true}',
  // (intermediate 192: the same sizes as another family's folder would share that family's profile entry.)
  phi3: '{"base":"phi-3-mini-4k","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":192,"vocab_size":1024,"chat":true}',
  olmo2: '{"base":"olmo-2-7b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024,"chat":true}',
  // Mixtures of experts: Mixtral's every layer sparse (4 experts, top 2); Qwen2-MoE's shared expert, layer 1 sparse
  // and layer 0 dense (decoder_sparse_step 2).
  mixtral: '{"base":"mixtral-8x7b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":96,"num_local_experts":4,"vocab_size":1024}',
  qwen2_moe: '{"base":"qwen1.5-moe-a2.7b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":160,"decoder_sparse_step":2,"num_experts":6,"num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":64,"vocab_size":1024}',
};
/** The newcomer's command exactly: `-m 20` and nothing else but where to read and write (these families' first run). */
const defaultsOnly = new Set(['gemma2', 'phi3', 'olmo2']);

export const scenario = 'synthetic_reasoning:mode=pattern_match';

/**
 * Makes the folders of `names` in a scratch root of their own (its own data folder: the host is profiled once per
 * file) and declares the two tests of each; returns the root and the data folder for more tests in the same file.
 */
export function familyRunTests(names: string[]): { root: string; dataDir: string } {
  const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-run-families-'));
  const dataDir = join(root, 'data');
  const families = Object.fromEntries(names.map((n) => [n, FAMILY_FOLDERS[n]!]));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  beforeAll(() => {
    for (const [name, config] of Object.entries(families)) {
      const r = flexhelm(['make-model', '--config', config, '--out', join(root, name)]);
      expect(r.status, r.stderr).toBe(0);
    }
  }, 120_000);

  for (const name of Object.keys(families)) {
    it(`${name}: --percent auto writes the profile, then a second run reads it from the cache`, () => {
      const run = (tag: string) => {
        const out = join(root, `out-${name}-${tag}`);
        // A separate request cache per run: the second run computes again (a cached run would never step the engine).
        const sizes = defaultsOnly.has(name) && tag === 'first' ? ['-m', '20'] : ['--max-eval-instances', '4', '-t', '1'];
        const r = flexhelm(['run', '-d', scenario, ...sizes, '--model', join(root, name), '--output-path', out, '--data-dir', dataDir, '--offline']);
        expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
        expect(r.status, r.stderr).toBe(0);
        const runDir = join(out, 'runs', 'v1', `${scenario},model=local_${name}`);
        expect(readdirSync(runDir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
        return r;
      };
      const first = run('first');
      expect(first.stderr).toMatch(/profile: onnxruntime fp32 \w+ layers at/);
      // A family onnxruntime does not compute yet is timed and run on the reference backend, saying so (never a crash).
      if (/profile: onnxruntime does not compute/.test(first.stderr)) expect(first.stderr).toMatch(/backend: (onnxruntime|the oneDNN backend) does not compute .*; computing with reference instead/);
      expect(existsSync(dataDir)).toBe(true);
      const second = run('cached');
      // The profile was not measured again: this machine and this shape were already in it.
      expect(second.stderr).not.toMatch(/profile: onnxruntime fp32/);
    }, 600_000);

    it(`${name}: flexhelm serve on the same folder (--percent auto, the cached profile) answers a completion, and a chat completion for an instruct folder`, async () => {
      const stderr = await serveAnswers(join(root, name), { dataDir, outputPath: join(root, `serve-${name}`), chat: Boolean(JSON.parse(families[name]!).chat) });
      expect(stderr).not.toMatch(/profile: onnxruntime fp32/);
    }, 300_000);
  }
  return { root, dataDir };
}

/**
 * `flexhelm serve --model <model> --percent auto` answers one completion (and one chat completion with `chat`), then
 * stops cleanly on SIGTERM; returns its stderr (checked free of stack traces).
 */
export async function serveAnswers(model: string, o: { dataDir: string; outputPath: string; chat?: boolean; servedName?: string }): Promise<string> {
  const served = o.servedName ? ['--served-model-name', o.servedName] : [];
  const child = spawn(process.execPath, [main, 'serve', '--model', model, ...served, '--percent', 'auto', '--port', '0', '--data-dir', o.dataDir, '--output-path', o.outputPath, '--offline'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const guard = setTimeout(() => child.kill('SIGKILL'), 240_000); // never outlive the test
  let stderr = '';
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => {
    clearTimeout(guard);
    done(code);
  }));
  const url = await new Promise<string>((done, fail) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const m = / on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (m) done(m[1]!);
    });
    child.on('exit', () => fail(new Error(`flexhelm serve exited early: ${stderr}`)));
  });
  const modelName = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;
  if (o.servedName) expect(modelName).toBe(o.servedName);
  const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: modelName, prompt: 'Hello', max_tokens: 3, temperature: 0 }) });
  const body = (await r.json()) as { usage: { completion_tokens: number }; choices: { text: string }[] };
  expect(r.status, JSON.stringify(body)).toBe(200);
  expect(body.usage.completion_tokens).toBeGreaterThan(0);
  expect(body.choices).toHaveLength(1);
  if (o.chat) {
    // The family's chat template (tokenizer_config.json) and end-of-turn tokens (its family entry).
    const c = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: modelName, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 3, temperature: 0 }) });
    const chat = (await c.json()) as { usage: { prompt_tokens: number }; choices: { message: { role: string; content: string } }[] };
    expect(c.status, JSON.stringify(chat)).toBe(200);
    expect(chat.choices[0]!.message.role).toBe('assistant');
    expect(chat.usage.prompt_tokens).toBeGreaterThan(3);
  }
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
  expect(stderr).not.toMatch(/internal error|\n\s+at /);
  return stderr;
}
