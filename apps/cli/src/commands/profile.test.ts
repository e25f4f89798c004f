import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-profile-'));
const modelDir = join(root, 'tiny');
const dataDir = join(root, 'data');

function flexhelm(args: string[]) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 240_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  makeTinyOptModel(modelDir, 7);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('flexhelm profile and --percent auto', () => {
  it('profiles the machine at a model’s shapes, caches it, and prints it as JSON', () => {
    const args = ['profile', '--path', modelDir, '--quick', '--data-dir', dataDir, '--offload-dir', join(root, 'offload')];
    const first = flexhelm([...args, '--json']);
    expect(first.stderr).not.toMatch(/internal error/);
    expect(first.status).toBe(0);
    const profile = JSON.parse(first.stdout);
    expect(profile.key.cores).toBeGreaterThan(0);
    expect(profile.quick).toBe(true);
    expect(profile.host.diskReadGBs.median).toBeGreaterThan(0);
    const shape = Object.values(profile.shapes)[0] as { shape: { hiddenSize: number }; backends: Record<string, { rows: number[] }> };
    expect(shape.shape.hiddenSize).toBe(64);
    expect(shape.backends['onnxruntime-fp32']!.rows.length).toBeGreaterThan(2);

    const again = flexhelm(args);
    expect(again.status).toBe(0);
    expect(again.stderr).toMatch(/cached/);
    expect(again.stdout).toMatch(/f16→f32 .* G elem\/s/);
    expect(again.stdout).toMatch(/onnxruntime-fp32 at .*hidden 64/);
    // The cost model is fitted to calibration runs of the model's shape.
    expect(again.stdout).toMatch(/cost model fitted to \d+ calibration runs/);

    // --json prints what is cached without measuring, even for a model whose shapes it lacks (a full, not --quick, ask).
    const shown = flexhelm(['profile', '--model', 'opt-1.3b', '--json', '--data-dir', dataDir, '--offload-dir', join(root, 'offload')]);
    expect(shown.status).toBe(0);
    expect(shown.stderr).toBe("profile: cached (pass --refresh to measure again; it has no figures for opt-1.3b's shapes yet: `flexhelm profile` without --json measures them)\n");
    expect(JSON.parse(shown.stdout)).toEqual(JSON.parse(flexhelm([...args, '--json']).stdout));
  });

  it("profiles a Llama-shaped folder with its own layer, under its family key", () => {
    const llama = join(root, 'tiny-llama');
    const made = flexhelm(['make-model', '--config', '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}', '--out', llama, '--dtype', 'f32']);
    expect(made.status).toBe(0);
    const r = flexhelm(['profile', '--path', llama, '--quick', '--data-dir', join(root, 'data-llama'), '--offload-dir', join(root, 'offload')]);
    expect(r.stderr).not.toMatch(/internal error/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/onnxruntime-fp32 at .*'s shapes \(llama layer, hidden 64, ffn 128, 2 KV heads\)/);
    const json = JSON.parse(flexhelm(['profile', '--path', llama, '--quick', '--json', '--data-dir', join(root, 'data-llama')]).stdout);
    expect(Object.keys(json.shapes)).toEqual(['h64-f128-n4-v1024-kv2x16-swiglu-rms']);
  });

  it('rejects a model given twice', () => {
    const r = flexhelm(['profile', '--path', modelDir, '--model', 'opt-125m']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--model or --path, not both/);
  });

  const run = ['run', '-d', 'synthetic_reasoning:mode=induction', '-m', '4', '--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', dataDir, '-t', '1'];

  it('runs end to end with --percent auto, printing the chosen policy, its prediction and the runner-up first', () => {
    const r = flexhelm([...run, '--percent', 'auto', '--gpu-batch-size', 'auto', '--output-path', join(root, 'out-auto')]);
    expect(r.stderr).not.toMatch(/internal error/);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/policy \(auto\): --percent \d+ \d+ 100 0 100 0 --gpu-batch-size \d+ --num-gpu-batches \d+ — predicted [\d.]+ tok\/s .*peak RAM [\d.]+ GiB/);
    expect(r.stderr).toMatch(/runner-up: --percent/);
    expect(r.stderr).toMatch(/searched \d+ policies \(\d+ fit\)/);
    // The choice comes before the engine is opened with it.
    expect(r.stderr.indexOf('policy (auto)')).toBeLessThan(r.stderr.indexOf('planned RAM'));
    expect(r.stdout).toMatch(/exact_match\s+test\s+/);
  });

  it('keeps what the user fixed: --percent given, --gpu-batch-size auto', () => {
    const r = flexhelm([...run, '--percent', '0', '100', '100', '0', '100', '0', '--gpu-batch-size', 'auto', '--output-path', join(root, 'out-fixed')]);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/policy \(auto\): --percent 0 100 100 0 100 0 --gpu-batch-size \d+ --num-gpu-batches 1 /);
  });

  it('refuses a given policy the model predicts will not fit, with the numbers', () => {
    const r = flexhelm([...run, '--percent', '100', '0', '100', '0', '100', '0', '--max-ram', '0.05', '--output-path', join(root, 'out-small')]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/the policy --percent 100 0 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 1 is predicted not to fit: peak RAM [\d.]+ GiB over 0\.0\d GiB/);
    expect(r.stderr).toMatch(/no policy fits|a policy that fits|try --percent auto/);
  });
});
