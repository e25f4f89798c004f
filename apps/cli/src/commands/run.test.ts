import { toNumber } from '@flexhelm/python-compat';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopbackFileServer, tarArchive } from '@flexhelm/downloads/testing';
import { readRunOutputs, RUN_OUTPUT_FILES } from '@flexhelm/runner';
import { runFileWithoutTimings } from '../run-file-without-timings.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { waitForCachedRequests } from '../test-cached-requests.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-run-'));
const modelDir = join(root, 'tiny');
const common = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '-t', '1'];

function flexhelm(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [main, 'run', ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 240_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** As `flexhelm`, without blocking this process (needed when this process also serves files to the child). */
function flexhelmAsync(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [main, 'run', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}


beforeAll(() => {
  makeTinyOptModel(modelDir, 7);
});

describe('flexhelm run', () => {
  it('runs a procedural scenario end to end and writes HELM’s five files', () => {
    const out = join(root, 'out-proc');
    const r = flexhelm(['-d', 'synthetic_reasoning:mode=induction', '-m', '4', '--output-path', out, ...common]);
    expect(r.stderr).not.toMatch(/internal error/);
    expect(r.status).toBe(0);
    const runDir = join(out, 'runs', 'v1', 'synthetic_reasoning:mode=induction,model=local_tiny-opt');
    expect(readdirSync(runDir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
    expect(r.stdout).toContain(`files: ${runDir}`);
    expect(r.stdout).toMatch(/exact_match\s+test\s+/);
    const outputs = readRunOutputs(runDir);
    expect(outputs.runSpec.adapter_spec.model).toBe('local/tiny-opt');
    expect(outputs.scenarioState.request_states).toHaveLength(4);
    const em = outputs.stats.find((s) => s.name.name === 'exact_match' && s.name.split === 'test' && !s.name.perturbation);
    expect(em?.count).toBe(1);
    // exact_match agrees with the completions written beside it
    const perInstance = outputs.perInstanceStats
      .map((p) => p.stats.find((s) => s.name.name === 'exact_match'))
      .filter((s) => s !== undefined)
      .map((s) => toNumber(s.sum));
    const recomputed = outputs.scenarioState.request_states.map((rs) =>
      rs.instance.references.some((ref) => ref.tags.includes('correct') && ref.output.text.trim() === rs.result!.completions[0]!.text.trim()) ? 1 : 0,
    );
    expect(perInstance).toEqual(recomputed);

    // flexhelm summarize: one table over the suite, written beside the runs without touching HELM's own files.
    // HELM's schema.yaml from the HELM checkout beside the clone (CI sets FLEXHELM_HELM_SOURCE_DIR to it).
    const helmSource = process.env.FLEXHELM_HELM_SOURCE_DIR ?? fileURLToPath(new URL('../../../../../shared/helm-v0.2.1', import.meta.url));
    const summary = spawnSync(process.execPath, [main, 'summarize', '--suite', 'v1', '--output-path', out], { encoding: 'utf8', env: { ...process.env, FLEXHELM_HELM_SOURCE_DIR: helmSource } });
    expect(summary.status).toBe(0);
    expect(summary.stdout).toContain('## synthetic_reasoning:mode=induction,model=local_tiny-opt');
    expect(summary.stdout).toMatch(/\| exact_match \| test \|/);
    const json = JSON.parse(readFileSync(join(out, 'runs', 'v1', 'flexhelm_summary.json'), 'utf8'));
    expect(json.runs[0].model).toBe('local/tiny-opt');
    expect(json.runs[0].metrics.find((m: { name: string; split: string }) => m.name === 'exact_match' && m.split === 'test').mean).toBe(toNumber(em!.mean!));
  }, 300_000);

  it('runs a download scenario served by a loopback mirror, and explains a missing file offline', async () => {
    const server = await LoopbackFileServer.start();
    try {
      const csv = (q: string, answer: string) => `${q},one,two,three,four,${answer}\n`;
      server.set(
        '/people.eecs.berkeley.edu/~hendrycks/data.tar',
        tarArchive({
          'data/dev/anatomy_dev.csv': csv('Dev question?', 'A') + csv('Another dev question?', 'B'),
          'data/val/anatomy_val.csv': csv('Valid question?', 'C'),
          'data/test/anatomy_test.csv': csv('Test question one?', 'D') + csv('Test question two?', 'A'),
        }),
      );
      const out = join(root, 'out-mmlu');
      const offline = await flexhelmAsync(['-d', 'mmlu:subject=anatomy', '--output-path', out, ...common, '--offline']);
      expect(offline.status).toBe(2);
      expect(offline.stderr).toContain('https://people.eecs.berkeley.edu/~hendrycks/data.tar');
      // nothing half-written: no run directory was created
      expect(existsSync(join(out, 'runs', 'v1')) && readdirSync(join(out, 'runs', 'v1')).length > 0).toBe(false);

      const r = await flexhelmAsync(['-d', 'mmlu:subject=anatomy', '--output-path', out, ...common, '--data-mirror', server.baseUrl]);
      expect(r.stderr).not.toMatch(/internal error/);
      expect(r.status).toBe(0);
      const runDir = join(out, 'runs', 'v1', 'mmlu:subject=anatomy,method=multiple_choice_joint,model=local_tiny-opt');
      const outputs = readRunOutputs(runDir);
      // 1 valid + 2 test eval instances, one multiple-choice request each, answered with one of the letters' logprobs
      expect(outputs.scenarioState.request_states).toHaveLength(3);
      for (const rs of outputs.scenarioState.request_states) {
        expect(rs.request.max_tokens).toBe(1);
        expect(rs.result!.completions[0]!.tokens[0]!.top_logprobs.size).toBe(rs.request.top_k_per_token);
      }
      expect(outputs.stats.some((s) => s.name.name === 'exact_match' && s.name.split === 'valid')).toBe(true);
    } finally {
      await server.close();
    }
  }, 300_000);

  it('resumes after kill -9 without recomputing, and writes the same files as an uninterrupted run', async () => {
    // 40 requests, recorded 8 at a time (the cache's chunk): several windows in which the run is part done, so a quiet
    // machine cannot finish it between two polls (with 12 requests it sometimes did: 8 then 12).
    const args = ['-d', 'synthetic_reasoning:mode=pattern_match', '-m', '40', '--gpu-batch-size', '2', ...common];
    const cachePath = join(root, 'resume.sqlite');
    // Interrupted: killed once some requests are in the cache.
    const child = spawn(process.execPath, [main, 'run', ...args, '--output-path', join(root, 'out-killed'), '--cache-path', cachePath], { stdio: 'ignore' });
    const cached = await waitForCachedRequests(cachePath, 4, 300);
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    expect(cached).toBeGreaterThanOrEqual(4);
    expect(cached).toBeLessThan(40);
    expect(existsSync(join(root, 'out-killed', 'runs', 'v1', 'synthetic_reasoning:mode=pattern_match,model=local_tiny-opt', 'stats.json'))).toBe(false);

    const resumed = flexhelm([...args, '--output-path', join(root, 'out-killed'), '--cache-path', cachePath]);
    expect(resumed.status).toBe(0);
    expect(resumed.stderr).toMatch(new RegExp(`\\(${cached} from cache\\)`));
    const fresh = flexhelm([...args, '--output-path', join(root, 'out-fresh'), '--cache-path', join(root, 'fresh.sqlite')]);
    expect(fresh.status).toBe(0);

    // Identical files, except the wall-clock measurements (and what is derived from them), which no two runs share.
    const runName = 'synthetic_reasoning:mode=pattern_match,model=local_tiny-opt';
    for (const f of RUN_OUTPUT_FILES) {
      expect(runFileWithoutTimings(join(root, 'out-killed', 'runs', 'v1', runName, f), join(root, 'out-killed')), f).toBe(
        runFileWithoutTimings(join(root, 'out-fresh', 'runs', 'v1', runName, f), join(root, 'out-fresh')),
      );
    }
  }, 600_000);

  it('refuses bad input with a clear message and exit status 2, before any work', () => {
    const bad = [
      [['-d', 'synthetic_reasoning:mode=pattern_match', '--percent', '60', '50', '100', '0', '100', '0', ...common], /percents add up to 110/],
      [['-d', 'synthetic_reasoning:mode=pattern_match', '--percent', '1', '2'], /--percent takes 6 values/],
      [['-d', 'synthetic_reasoning:mode=pattern_match', '--model', 'facebook/opt-1.3b', '--path', modelDir, '--data-dir', join(root, 'data')], /do not match facebook\/opt-1\.3b: hiddenSize is 64, expected 2048/],
      [['-d', 'synthetic_reasoning:mode=pattern_match', '--model', 'facebook/opt-125m', '--offline', '--data-dir', join(root, 'empty')], /not in .* and downloads are off \(--offline\)/],
      [['-d', 'synthetic_reasoning:mode=pattern_match', ...common, '--max-ram', '0.0001'], /does not fit: needs .* GiB of RAM but the budget is/],
      [['-d', 'no_such_scenario', ...common], /Unknown run spec name: no_such_scenario/],
      [['-d', 'synthetic_reasoning:mode=pattern_match', ...common, '--cpu-cache-compute'], /--cpu-cache-compute is not implemented: there is no GPU, so attention always runs on the CPU; leave the flag out/],
      [['-d', 'synthetic_reasoning:mode=pattern_match', ...common, '--compute-dtype', 'int8'], /--compute-dtype int8 is experimental .*set FLEXHELM_EXPERIMENTAL_INT8=1 to opt in/],
    ] as const;
    for (const [args, message] of bad) {
      const r = flexhelm([...args, '--output-path', join(root, 'out-bad')], { FLEXHELM_EXPERIMENTAL_INT8: '' });
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.status, args.join(' ')).toBe(2);
    }
    expect(existsSync(join(root, 'out-bad', 'runs'))).toBe(false);
  }, 300_000);
});

afterAll(() => {});
