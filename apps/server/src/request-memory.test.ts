import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeHubModel } from '@flexhelm/engine';
import { writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';
import { beforeAll, describe, expect, it } from 'vitest';
import { serverRamParts } from './server-memory-plan.js';
import { post, spawnServerBinary } from './test-server.js';

// Issue 26 item 1: one long prompt took a server with a 1 GiB budget to 4.7 GB of RSS (its logits and attention
// scratch grew with the prompt's square, kept per layer by onnxruntime's arenas). A real server process, a 2-layer
// Llama with Llama 3's 128,256-token vocabulary and a tiny hidden size: the vocabulary is what makes it heavy.
const root = mkdtempSync(join(tmpdir(), 'flexhelm-server-memory-'));
const modelDir = join(root, 'llama');
const GiB = 1024 ** 3;

beforeAll(() => {
  makeHubModel({
    config: { base: 'llama-3.2-1b', num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2 },
    outDir: modelDir,
    dtype: 'f32',
    tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o),
  });
});

/**
 * The server with `modelGiB` for the model: --max-ram adds what the server sets aside for itself (its threads at their
 * heap caps; its modules measure below the plan's runtime term, so they add nothing).
 */
async function startServer(modelGiB: number) {
  const maxRam = modelGiB + serverRamParts({ startRssBytes: 0 }).bytes / GiB;
  const { child, url, exited, stderr } = await spawnServerBinary(['--model', 'local/llama', '--path', modelDir, '--data-dir', join(root, 'data'), '--output-path', join(root, 'out'), '--offline', '--port', '0', '--max-ram', String(maxRam), '--compute-dtype', 'fp32'], 240_000); // never outlive the test
  /** Peak resident memory of the server process so far (VmHWM). */
  const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) * 1024;
  const stop = async () => {
    child.kill('SIGTERM');
    await exited;
  };
  return { url, peakRss, stop, stderr };
}

describe.runIf(process.platform === 'linux')('a long prompt against --max-ram', () => {
  it('stays within the budget: 8,002 prompt tokens over a 128,256-token vocabulary under --max-ram 1', async () => {
    const server = await startServer(1);
    try {
      expect(server.stderr()).toMatch(/planned RAM 0\.\d\d GiB of 1\.00 GiB/);
      const r = await post(`${server.url}/v1/completions`, { prompt: 'hello world '.repeat(4000), max_tokens: 1, temperature: 0 });
      expect(r.status).toBe(200);
      expect(r.json.usage.prompt_tokens).toBe(8002);
      expect(r.json.choices[0].finish_reason).toBe('length');
      // Before: 4.7 GB (and the kernel's OOM killer at twice the prompt). The budget covers Node and onnxruntime too.
      expect(server.peakRss()).toBeLessThan(1 * GiB);
      // The whole process within the plan the server announced (the model's and its own threads' and modules').
      const plan = /server RAM plan ([\d.]+) GiB of ([\d.]+) GiB/.exec(server.stderr())!;
      expect(Number(plan[1])).toBeLessThanOrEqual(Number(plan[2]));
      expect(server.peakRss()).toBeLessThanOrEqual(Number(plan[1]) * GiB);
      // Still serving.
      const small = await post(`${server.url}/v1/completions`, { prompt: 'hello', max_tokens: 2, temperature: 0 });
      expect(small.status).toBe(200);
    } finally {
      await server.stop();
    }
  }, 240_000);

  it('refuses a prompt that cannot fit with a 400 naming its tokens, the need, the budget and the fix', async () => {
    const server = await startServer(0.3);
    try {
      const r = await post(`${server.url}/v1/completions`, { prompt: 'hello world '.repeat(15000), max_tokens: 1 });
      expect(r.status).toBe(400);
      expect(r.json.error.type).toBe('invalid_request_error');
      expect(r.json.error.param).toBe('prompt');
      expect(r.json.error.code).toBe('request_too_large');
      expect(r.json.error.message).toMatch(/^prompt 0: a prompt of 30002 tokens with 1 new tokens needs 0\.\d\d GiB of RAM, more than the 0\.30 GiB budget \(--max-ram\); shorten the prompt to at most \d+ tokens, or raise --max-ram$/);
      const fits = Number(/at most (\d+) tokens/.exec(r.json.error.message)![1]);
      expect(fits).toBeGreaterThan(1000);
      expect(fits).toBeLessThan(30002);
      // A prompt that fits is served by the same process.
      const ok = await post(`${server.url}/v1/completions`, { prompt: 'hello world '.repeat(500), max_tokens: 1, temperature: 0 });
      expect(ok.status).toBe(200);
    } finally {
      await server.stop();
    }
  }, 240_000);
});
