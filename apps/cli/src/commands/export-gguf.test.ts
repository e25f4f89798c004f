import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readGguf } from '@flexhelm/gguf';
import { LoopbackFileServer, tarArchive } from '@flexhelm/downloads/testing';
import { readRunOutputs } from '@flexhelm/runner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-gguf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function flexhelm(args: string[], timeout = 240_000) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const model = join(root, 'llama3');
// K-quants hold 256 values a super-block: a model whose matrices are whole super-blocks wide.
const model256 = join(root, 'llama3-256');
beforeAll(() => {
  const config = (hidden: number, ffn: number) =>
    `{"base":"llama-3.2-1b","hidden_size":${hidden},"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":${ffn},"vocab_size":1024}`;
  for (const [out, hidden, ffn] of [[model, 64, 128], [model256, 256, 512]] as const) {
    const r = flexhelm(['make-model', '--config', config(hidden, ffn), '--out', out, '--dtype', 'f32']);
    expect(r.status, r.stderr).toBe(0);
  }
}, 120_000);

const scenario = 'synthetic_reasoning:mode=pattern_match';
/** The completions of a run, by instance. */
function completions(model: string, name: string): string[] {
  const out = join(root, `out-${name}`);
  const r = flexhelm(['run', '-d', scenario, '-m', '6', '--model', model, '--output-path', out, '--data-dir', join(root, 'data'), '-t', '1']);
  expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
  expect(r.status, r.stderr).toBe(0);
  const runs = join(out, 'runs', 'v1');
  const outputs = readRunOutputs(join(runs, readdirSync(runs).find((d) => d.startsWith(scenario))!));
  return outputs.scenarioState.request_states.map((rs) => rs.result!.completions[0]!.text);
}

/** As `flexhelm`, without blocking this process (it serves the data files to the child). */
function flexhelmAsync(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

describe('flexhelm export-gguf and --model FILE.gguf', () => {
  it('exports F32, and a HELM run on the file predicts as the run on the folder', () => {
    const file = join(root, 'llama3-f32.gguf');
    const r = flexhelm(['export-gguf', '--model', model, '--out', file, '--type', 'F32']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/wrote .*llama3-f32\.gguf/);
    expect(readGguf(file).metadata.get('general.architecture')).toBe('llama');
    expect(completions(file, 'gguf')).toEqual(completions(model, 'folder'));
  }, 240_000);

  it('exports Q4_0 and runs it from a folder holding the file', () => {
    const dir = join(root, 'q4');
    const r = flexhelm(['export-gguf', '--model', model, '--out', join(dir, 'model-q4_0.gguf'), '--type', 'q4_0']);
    expect(r.status, r.stderr).toBe(0);
    expect(readGguf(join(dir, 'model-q4_0.gguf')).tensors.find((t) => t.name === 'blk.0.ffn_down.weight')!.type).toBe('Q4_0');
    expect(completions(dir, 'gguf-q4')).toHaveLength(6);
  }, 240_000);

  // Q4_0's prompt rows on q8_0 activations (its gate); Q4_K_M's (Q4_K and Q6_K) widened to bf16 for the prompt
  // (FLEXHELM_QUANT_INT8_PREFILL=0, ACCURACY_GATE): on their q8_K default (Q8K_ACTIVATION_GATE, 0.135 of the rms on
  // onednn-backend's made model) one of these 7 greedy tokens of a random model flips at a near tie, which the logit
  // gate of quantized-gguf.test.ts (no clear argmax miss) is the check for.
  it.each([
    ['Q4_0', () => model, /15 Q4_0 matrices of .*model-q4_0\.gguf multiplied as stored/, {}],
    ['Q4_K_M', () => model256, /12 Q4_K, 3 Q6_K matrices of .*model-q4_k_m\.gguf multiplied as stored/, { FLEXHELM_QUANT_INT8_PREFILL: '0' }],
  ] as const)('a %s file computed on its blocks (oneDNN) answers MMLU as its dequantized weights do on onnxruntime fp32', async (type, source, held, env) => {
    const name = `model-${type.toLowerCase()}`;
    const file = join(root, `mmlu-${type}`, `${name}.gguf`);
    expect(flexhelm(['export-gguf', '--model', source(), '--out', file, '--type', type]).status).toBe(0);
    const server = await LoopbackFileServer.start();
    try {
      const csv = (q: string, answer: string) => `${q},one,two,three,four,${answer}\n`;
      const test = ['What is the femur?', 'Where is the liver?', 'Which bone is longest?', 'What does the heart pump?', 'Where are the lungs?', 'What is a tendon?'];
      server.set(
        '/people.eecs.berkeley.edu/~hendrycks/data.tar',
        tarArchive({
          'data/dev/anatomy_dev.csv': csv('Dev question?', 'A') + csv('Another dev question?', 'B'),
          'data/val/anatomy_val.csv': csv('Valid question?', 'C'),
          'data/test/anatomy_test.csv': test.map((q, i) => csv(q, 'ABCD'[i % 4]!)).join(''),
        }),
      );
      const data = join(root, `data-mmlu-${type}`);
      const predictions = async (m: string, name: string, extra: string[] = [], vars: Record<string, string> = {}) => {
        const out = join(root, `out-mmlu-${type}-${name}`);
        const r = await flexhelmAsync(['run', '-d', 'mmlu:subject=anatomy', '--model', m, '--output-path', out, '--data-dir', data, '--data-mirror', server.baseUrl, '-t', '1', ...extra], vars);
        expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
        expect(r.status, r.stderr).toBe(0);
        const runs = join(out, 'runs', 'v1');
        const outputs = readRunOutputs(join(runs, readdirSync(runs).find((d) => d.startsWith('mmlu:'))!));
        return { stderr: r.stderr, answers: outputs.scenarioState.request_states.map((rs) => rs.result!.completions[0]!.text) };
      };
      // Every layer resident (blocks are held by resident layers only; `auto` may stream a model this small).
      const quantized = await predictions(file, 'q4', ['--percent', '100', '0', '100', '0', '100', '0'], env);
      // Where oneDNN runs here, the file's matrices (14 in the layers, the tied head) were multiplied as stored.
      if (/backend: oneDNN/.test(quantized.stderr)) expect(quantized.stderr).toMatch(held);
      // The same file on onnxruntime fp32: every matrix dequantized to float32 as it is read.
      const widened = await predictions(file, 'widened', ['--compute-dtype', 'fp32']);
      expect(widened.stderr).toMatch(/backend: onnxruntime fp32/);
      expect(quantized.answers).toHaveLength(7);
      expect(quantized.answers).toEqual(widened.answers);
    } finally {
      await server.close();
    }
  }, 300_000);

  it('refuses bad input in one line (exit 2)', () => {
    expect(flexhelm(['export-gguf', '--model', model, '--out', join(root, 'x.gguf'), '--type', 'Q5_K']).stderr).toMatch(/^flexhelm export-gguf: --type Q5_K: one of F32, F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M\n/);
    const garbage = join(root, 'garbage.gguf');
    writeFileSync(garbage, 'GGUF\x03\x00\x00\x00 not really');
    const run = flexhelm(['run', '-d', scenario, '-m', '2', '--model', garbage, '--output-path', join(root, 'out-bad'), '--data-dir', join(root, 'data')]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^flexhelm run: .*garbage\.gguf: not a valid GGUF file: tensor count is \d+, larger than any file/m);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  }, 240_000);
});
