import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { knownHubBases } from '@flexhelm/engine';
import { RUN_OUTPUT_FILES } from '@flexhelm/runner';

// The default path of a newcomer, for every family `make-model` knows: `flexhelm run` without --percent (auto: the
// machine profile is measured and written), then again (the profile is read from the cache: the cost model and the
// drift monitor must key it by the same family-aware shape as the search did).
const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-run-families-'));
const dataDir = join(root, 'data');
afterAll(() => rmSync(root, { recursive: true, force: true }));

function flexhelm(args: string[], timeout = 300_000) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// One tiny model per family (2 layers, hidden 64, the family's attention and MLP: GQA, SwiGLU, QKV bias, sliding window).
const families: Record<string, string> = {
  opt: '{"base":"opt-125m","hiddenSize":64,"numHiddenLayers":2,"numAttentionHeads":4,"ffnDim":128}',
  llama: '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}',
  mistral: '{"base":"mistral-7b-v0.1","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":1,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024,"sliding_window":64}',
  qwen2: '{"base":"qwen2-0.5b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}',
};

beforeAll(() => {
  for (const [name, config] of Object.entries(families)) {
    const r = flexhelm(['make-model', '--config', config, '--out', join(root, name)]);
    expect(r.status, r.stderr).toBe(0);
  }
}, 120_000);

const scenario = 'synthetic_reasoning:mode=pattern_match';

describe('flexhelm run on the default path, for every family', () => {
  it('covers every family make-model can write', () => {
    const prefixes = new Set(knownHubBases().map((b) => b.replace(/-[\d.]+[a-z]*(-v[\d.]+)?$/, '').replace(/-\d+$/, '').split('-')[0]));
    expect([...prefixes].sort()).toEqual(Object.keys(families).sort());
  });

  for (const name of Object.keys(families)) {
    it(`${name}: --percent auto writes the profile, then a second run reads it from the cache`, () => {
      const run = (tag: string) => {
        const out = join(root, `out-${name}-${tag}`);
        // A separate request cache per run: the second run computes again (a cached run would never step the engine).
        const r = flexhelm(['run', '-d', scenario, '--max-eval-instances', '4', '-t', '1', '--model', join(root, name), '--output-path', out, '--data-dir', dataDir, '--offline']);
        expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
        expect(r.status, r.stderr).toBe(0);
        const runDir = join(out, 'runs', 'v1', `${scenario},model=local_${name}`);
        expect(readdirSync(runDir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
        return r;
      };
      const first = run('first');
      expect(first.stderr).toMatch(/profile: onnxruntime fp32 \w+ layers at/);
      expect(existsSync(dataDir)).toBe(true);
      const second = run('cached');
      // The profile was not measured again: this machine and this shape were already in it.
      expect(second.stderr).not.toMatch(/profile: onnxruntime fp32/);
    }, 600_000);

    it(`${name}: flexhelm serve on the same folder (--percent auto, the cached profile) answers a completion`, async () => {
      const child = spawn(process.execPath, [main, 'serve', '--model', join(root, name), '--percent', 'auto', '--port', '0', '--data-dir', dataDir, '--output-path', join(root, `serve-${name}`), '--offline'], { stdio: ['ignore', 'pipe', 'pipe'] });
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
      const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: `local/${name}`, prompt: 'Hello', max_tokens: 3, temperature: 0 }) });
      const body = (await r.json()) as { usage: { completion_tokens: number }; choices: { text: string }[] };
      expect(r.status, JSON.stringify(body)).toBe(200);
      expect(body.usage.completion_tokens).toBeGreaterThan(0);
      expect(body.choices).toHaveLength(1);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(stderr).not.toMatch(/internal error|\n\s+at /);
      expect(stderr).not.toMatch(/profile: onnxruntime fp32/);
    }, 300_000);
  }

  it('a fixed --percent with a profile that has other shapes only runs (no drift figures to compare with)', () => {
    const other = join(root, 'opt-other');
    expect(flexhelm(['make-model', '--config', '{"base":"opt-125m","hiddenSize":32,"numHiddenLayers":2,"numAttentionHeads":2,"ffnDim":64}', '--out', other]).status).toBe(0);
    const r = flexhelm(['run', '-d', scenario, '--max-eval-instances', '2', '-t', '1', '--model', other, '--percent', '100', '0', '100', '0', '100', '0', '--output-path', join(root, 'out-other'), '--data-dir', dataDir, '--offline']);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(r.status, r.stderr).toBe(0);
  }, 300_000);
});
