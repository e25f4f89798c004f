import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// Runs the built binary, as a user would.
const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const flexhelm = (...args: string[]) => {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-cli-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('flexhelm make-model / generate / export-onnx', () => {
  it('makes a model with the default tokenizer, generates text with logprobs and exports it', () => {
    const model = join(dir, 'tiny');
    const made = flexhelm('make-model', '--config', '{"hiddenSize":32,"numHiddenLayers":1,"numAttentionHeads":2,"maxPositionEmbeddings":64}', '--out', model, '--seed', '1');
    expect(made.stderr).toMatch(/^wrote .*tiny: opt-125m-custom, 1 layers, hidden 32, vocab 50272, f32 with the default tokenizer\n$/);
    expect(made.status).toBe(0);
    expect(existsSync(join(model, 'tokenizer.json'))).toBe(true);

    const gen = flexhelm('generate', '--model', model, '--prompt', 'Hello world', '--max-new-tokens', '3', '--logprobs', '2', '--echo');
    expect(gen.status).toBe(0);
    const out = JSON.parse(gen.stdout);
    const c = out.results[0].completions[0];
    expect(c.tokens).toHaveLength(3);
    expect(c.finish_reason).toBe('length');
    expect(c.prompt_tokens.map((t: { text: string }) => t.text)).toEqual(['</s>', 'Hello', ' world']);
    expect(c.prompt_tokens[0].logprob).toBeNull();
    expect(c.tokens[0].logprob).toBeLessThan(0);
    expect(Object.keys(c.tokens[0].top_logprobs)).toHaveLength(2);
    expect(c.text).toBe(c.tokens.map((t: { text: string }) => t.text).join(''));

    const exported = flexhelm('export-onnx', '--model', model, '--out', join(dir, 'onnx'));
    expect(exported.status).toBe(0);
    expect(existsSync(join(dir, 'onnx', 'onnx', 'model.onnx'))).toBe(true);
    expect(existsSync(join(dir, 'onnx', 'tokenizer.json'))).toBe(true);
  });

  it('explains bad input with exit status 2', () => {
    const missing = flexhelm('generate', '--model', join(dir, 'nope'), '--prompt-ids', '2,5');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toBe(`flexhelm generate: --model ${join(dir, 'nope')}: no such folder\n`);
    const dtype = flexhelm('make-model', '--config', 'opt-125m', '--out', join(dir, 'x'), '--dtype', 'bf16');
    expect([dtype.status, dtype.stderr.split('\n')[0]]).toEqual([2, 'flexhelm make-model: OPT checkpoints are written in f16 or f32 (the published OPT weights are float16); pass --dtype f16 or f32']);
    const unknown = flexhelm('make-model', '--config', 'opt-7b', '--out', join(dir, 'y'));
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown OPT model "opt-7b"; known names: opt-125m/);
    expect(existsSync(join(dir, 'y'))).toBe(false);
  });

  it('generates from a GGUF file read in place, as from the folder it was exported from; a garbage file is refused in one line', () => {
    const folder = join(dir, 'llama-tiny');
    const config = '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":96,"vocab_size":600}';
    expect(flexhelm('make-model', '--config', config, '--out', folder, '--dtype', 'f32').status).toBe(0);
    const file = join(dir, 'llama-tiny-f32.gguf');
    expect(flexhelm('export-gguf', '--model', folder, '--out', file, '--type', 'F32').status).toBe(0);
    const args = ['--prompt', 'Hello world', '--max-new-tokens', '4', '--logprobs', '3', '--echo'];
    const fromFolder = flexhelm('generate', '--model', folder, ...args);
    const fromFile = flexhelm('generate', '--model', file, '--data-dir', join(dir, 'data'), ...args);
    expect(fromFile.stderr).toBe('');
    expect(fromFile.status).toBe(0);
    // The same weights (F32) and tokenizer: the same tokens and logprobs.
    expect(JSON.parse(fromFile.stdout).results).toEqual(JSON.parse(fromFolder.stdout).results);
    const garbage = join(dir, 'garbage.gguf');
    writeFileSync(garbage, 'GGUF\x03\x00\x00\x00 not really');
    const bad = flexhelm('generate', '--model', garbage, '--data-dir', join(dir, 'data'), '--prompt-ids', '2,5');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/^flexhelm generate: .*garbage\.gguf: not a valid GGUF file/);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  });
});
