import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { post, spawnServerBinary } from './test-server.js';
import { serverRamParts } from './server-memory-plan.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

const main = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-server-main-'));
const modelDir = join(root, 'tiny');
const common = ['--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '--output-path', join(root, 'out'), '--offline'];

beforeAll(() => {
  makeTinyOptModel(modelDir, 5);
});

/** Starts the server binary; resolves once it prints its URL. */
function startBinary(args: string[]) {
  return spawnServerBinary([...common, '--port', '0', ...args], 60_000); // never outlive the test
}

describe('flexhelm-server', () => {
  it('serves on the port it prints and exits 0 on SIGTERM', async () => {
    const server = await startBinary([]);
    const r = await post(`${server.url}/v1/completions`, { model: 'local/tiny-opt', prompt: 'Hello', max_tokens: 3, temperature: 0 });
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(3);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.stderr()).toContain('SIGTERM: finishing in-flight requests and saving jobs');
  });

  it('serves under --served-model-name, answers /health, and logs one access line per request', async () => {
    const server = await startBinary(['--served-model-name', 'my-model']);
    const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['my-model']);
    const r = await post(`${server.url}/v1/completions`, { model: 'my-model', prompt: 'Hello', max_tokens: 3, temperature: 0 });
    expect(r.status).toBe(200);
    expect(r.json.model).toBe('my-model');
    expect((await post(`${server.url}/v1/completions`, { model: 'local/tiny-opt', prompt: 'Hello' })).status).toBe(404);
    const health = await fetch(`${server.url}/health`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok', model: 'my-model' }]);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const access = server.stderr().split('\n').filter((l) => /^(GET|POST) \//.test(l));
    expect(access[0]).toMatch(/^GET \/v1\/models 200 prompt_tokens=- completion_tokens=- \d+ ms$/);
    expect(access[1]).toMatch(/^POST \/v1\/completions 200 prompt_tokens=2 completion_tokens=3 \d+ ms$/);
    expect(access[2]).toMatch(/^POST \/v1\/completions 404 /);
    expect(access[3]).toMatch(/^GET \/health 200 /);
    expect(server.stderr()).toMatch(/loading local\/tiny-opt; GET \/health answers 503 until it is ready/);
    // The request cache is named after the HELM model name (not the served name, not the folder's absolute path).
    expect(readdirSync(join(root, 'out', 'cache')).filter((f) => f.endsWith('.sqlite'))).toEqual(['local_tiny-opt.sqlite']);
  });

  it('opens the engine with an offloading policy, as flexhelm run does', async () => {
    const offloadDir = join(root, 'offload');
    const resident = await startBinary([]);
    const body = { model: 'local/tiny-opt', prompt: 'The quick brown fox', max_tokens: 4, temperature: 0, logprobs: 1 };
    const expected = await post(`${resident.url}/v1/completions`, body);
    resident.child.kill('SIGTERM');
    expect(await resident.exited).toBe(0);

    // Weights half in pinned RAM, half on disk (both f16), streamed layer by layer.
    const server = await startBinary(['--percent', '0', '50', '100', '0', '100', '0', '--gpu-batch-size', '2', '--offload-dir', offloadDir]);
    expect(server.stderr()).toMatch(/policy --percent 0 50 100 0 100 0 --gpu-batch-size 2 --num-gpu-batches 1; planned RAM/);
    expect(server.stderr()).toMatch(/layer weights: .*host [\d.]+ MiB \([1-9]\d* tensors.*disk [\d.]+ MiB \([1-9]\d* tensors/);
    expect(readdirSync(offloadDir)).toHaveLength(1); // the engine's scratch folder with the disk-tier files
    const r = await post(`${server.url}/v1/completions`, body);
    expect(r.status).toBe(200);
    // f16 storage of the streamed weights moves logprobs only slightly on this tiny model.
    const got = r.json.choices[0].logprobs.token_logprobs as number[];
    const want = expected.json.choices[0].logprobs.token_logprobs as number[];
    expect(got).toHaveLength(4);
    got.forEach((lp, i) => { expect(Math.abs(lp - want[i]!)).toBeLessThan(0.05); });
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(readdirSync(offloadDir)).toEqual([]);
  });

  it('refuses a policy that does not fit the RAM budget, or a bad policy, before serving', () => {
    const run = (args: string[]) => spawnSync(process.execPath, [main, ...common, '--port', '0', ...args], { encoding: 'utf8', timeout: 60_000 });
    // Below what the server itself takes (its threads at their heap caps): refused before the model is opened.
    const none = run(['--max-ram', '0.0001']);
    expect(none.stderr).toMatch(/^flexhelm-server: --max-ram 0\.00 GiB leaves nothing for the model: the server itself takes up to [\d.]+ GiB \(4 text-worker threads [\d.]+ GiB \(512 MiB heap each\), the job\/summarize thread [\d.]+ GiB \(512 MiB heap, --job-worker-heap-mib\), server modules [\d.]+ GiB \(measured RSS [\d.]+ GiB at start, less the plan's runtime 0\.13 GiB\)\); raise --max-ram, or lower --job-worker-heap-mib\n$/);
    expect(none.status).toBe(2);
    // Enough for the server, not for the model: the model's plan is refused, naming the server's share.
    const serverGiB = serverRamParts({ startRssBytes: 0 }).bytes / 2 ** 30;
    const budget = run(['--max-ram', String(serverGiB + 0.0001)]);
    expect(budget.stderr).toMatch(/flexhelm-server: the offloading plan does not fit: needs [\d.]+ GiB of RAM but the budget is .*\(the model's budget is --max-ram [\d.]+ GiB less [\d.]+ GiB the server itself takes: 4 text-worker threads/);
    expect(budget.status).toBe(2);
    const percents = run(['--percent', '60', '50', '100', '0', '100', '0']);
    expect(percents.stderr).toMatch(/percents add up to 110/);
    expect(percents.status).toBe(2);
    const short = run(['--percent', '1', '2']);
    expect(short.stderr).toMatch(/--percent takes 6 values \(WG WC CG CC HG HC\), got 2/);
    expect(short.status).toBe(2);
    const dtype = run(['--compute-dtype', 'fp8']);
    expect(dtype.stderr).toMatch(/--compute-dtype takes auto, fp32, bf16, int8, got 'fp8'/);
    expect(dtype.status).toBe(2);
  });

  it('explains bad options and unsafe binds', () => {
    const port = spawnSync(process.execPath, [main, ...common, '--port', 'abc'], { encoding: 'utf8', timeout: 60_000 });
    expect(port.status).toBe(2);
    expect(port.stderr).toMatch(/--port must be an integer ≥ 0, got 'abc'/);
    const open = spawnSync(process.execPath, [main, ...common, '--host', '0.0.0.0'], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, FLEXHELM_API_KEY: '' } });
    expect(open.status).toBe(1);
    expect(open.stderr).toMatch(/refusing to bind 0\.0\.0\.0 without an API key.*--api-key/);
    const help = spawnSync(process.execPath, [main, '--help'], { encoding: 'utf8', timeout: 60_000 });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: flexhelm-server/);
  });
});
