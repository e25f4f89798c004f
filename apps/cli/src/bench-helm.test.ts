import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../bench/bench-helm.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-bench-helm-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function bench(args: string[]): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

describe('pnpm bench:helm --quick (the plumbing, not the timings)', () => {
  it('runs flexhelm run on loopback MMLU data, then the same requests through @huggingface/transformers, and reports both', async () => {
    const json = join(dir, 'report.json');
    const r = await bench(['--quick', '--computes', 'fp32', '--json', json, '--work-dir', join(dir, 'work')]);
    expect(r.stderr).toContain('wrote');
    expect(r.status).toBe(0);
    const report = JSON.parse(readFileSync(json, 'utf8'));
    expect(report.host.cpu_model).toBeTruthy();
    expect(report.host.host_type).toContain(report.host.cpu_model);
    expect(report.host.load_average_after).toHaveLength(3);
    expect(report).toMatchObject({ quick: true, instances: 4, trials: 1, description: 'mmlu:subject=philosophy,model=text' });
    expect(report.runs).toHaveLength(1);
    const [run] = report.runs;
    expect(run).toMatchObject({ compute: 'fp32', run_name: 'mmlu:subject=philosophy,method=multiple_choice_joint,model=local_bench-opt', requests: 4, goal: 0.5 });
    expect(run.backend_notice).toMatch(/^backend: onnxruntime fp32/);
    // The policy `--percent auto` chose. A near tie in predicted throughput goes to the leaner policy, which on a
    // loaded host can stream or compress the weights: then the layers build no onnxruntime sessions of their own.
    expect(run.policy).toMatch(/^--percent \d+ \d+ \d+ \d+ \d+ \d+ --gpu-batch-size \d+ --num-gpu-batches 1/);
    const resident = run.policy.startsWith('--percent 100 0 ') && !run.policy.includes('--compress-weight');
    // FLEXHELM_TIMINGS: the fixed cost by phase, the engine's load inside the session's start.
    const phases = ['run.startup', 'session.start', 'engine.load', 'engine.layer-read', 'run.first-batch', ...(resident ? ['ort.layer-sessions'] : [])];
    expect(Object.keys(run.phases_ms), JSON.stringify(run)).toEqual(expect.arrayContaining(phases));
    for (const phase of phases) expect(run.phases_ms[phase], phase).toBeGreaterThanOrEqual(0);
    expect(run.phases_ms['engine.load']).toBeLessThanOrEqual(run.phases_ms['session.start']);
    expect(run.phases_ms['session.start']).toBeLessThan(run.wall_s * 1000);
    // The peer answered exactly the run's requests: 4 eval instances, 1 trial, one token each (multiple choice joint).
    expect(report.peer).toMatchObject({ requests: 4, distinct: 4, generated_tokens: 4 });
    expect(run.ratio_ours_over_peer).toBeCloseTo(run.wall_s / report.peer.wall_s, 2);
    // The synthetic questions make prompts of a few hundred tokens (5 in-context examples each).
    expect(report.peer.prompt_tokens).toBeGreaterThan(4 * 200);
    expect(run.prompt_tokens).toBe(report.peer.prompt_tokens);
  }, 300_000);

  it('refuses bad options with a message, before doing anything', async () => {
    const r = await bench(['--quick', '--instances', '0']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--instances must be a whole number ≥ 1');
    const d = await bench(['--computes', 'fp16']);
    expect(d.status).toBe(2);
    expect(d.stderr).toContain("--computes takes bf16 and/or fp32, got 'fp16'");
  });
});
