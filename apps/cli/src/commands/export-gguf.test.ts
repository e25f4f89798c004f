import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readGguf } from '@flexhelm/gguf';
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
beforeAll(() => {
  const config = '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}';
  const r = flexhelm(['make-model', '--config', config, '--out', model, '--dtype', 'f32']);
  expect(r.status, r.stderr).toBe(0);
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

  it('refuses bad input in one line (exit 2)', () => {
    expect(flexhelm(['export-gguf', '--model', model, '--out', join(root, 'x.gguf'), '--type', 'Q5_K']).stderr).toMatch(/^flexhelm export-gguf: --type Q5_K: one of F32, F16, BF16, Q8_0, Q4_0\n/);
    const garbage = join(root, 'garbage.gguf');
    writeFileSync(garbage, 'GGUF\x03\x00\x00\x00 not really');
    const run = flexhelm(['run', '-d', scenario, '-m', '2', '--model', garbage, '--output-path', join(root, 'out-bad'), '--data-dir', join(root, 'data')]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^flexhelm run: .*garbage\.gguf: not a valid GGUF file: tensor count is \d+, larger than any file/m);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  }, 240_000);
});
