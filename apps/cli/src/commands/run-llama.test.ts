import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAMILY_REGISTRY } from '@flexhelm/engine';
import { readRunOutputs, RUN_OUTPUT_FILES } from '@flexhelm/runner';
import { runFileWithoutTimings } from '../run-file-without-timings.js';
import { waitForCachedRequests } from '../test-cached-requests.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-run-llama-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function flexhelm(args: string[], timeout = 240_000) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// Tiny random models of each family in the Hub layout (bf16, the family's tokenizer), made by `flexhelm make-model`.
const families: [string, string][] = [
  ['llama3', '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}'],
  ['mistral', '{"base":"mistral-7b-v0.1","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":1,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024,"sliding_window":64}'],
  ['qwen2', '{"base":"qwen2-0.5b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}'],
];

beforeAll(() => {
  for (const [name, config] of families) {
    const r = flexhelm(['make-model', '--config', config, '--out', join(root, name)]);
    expect(r.status, r.stderr).toBe(0);
  }
}, 120_000);

const scenario = 'synthetic_reasoning:mode=pattern_match';
const runName = (name: string) => `${scenario},model=local_${name}`;

describe('flexhelm run on Llama-family folders', () => {
  for (const [name] of families) {
    for (const dtype of ['fp32', 'bf16']) {
      it(`${name}: -m 20 with --percent 0 50 100 0 100 0 (--compute-dtype ${dtype}) writes HELM's five files`, () => {
        const out = join(root, `out-${name}-${dtype}`);
        const r = flexhelm(['run', '-d', scenario, '-m', '20', '--model', join(root, name), '--percent', '0', '50', '100', '0', '100', '0', '--compute-dtype', dtype, '--output-path', out, '--data-dir', join(root, 'data'), '-t', '1']);
        expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
        expect(r.status, r.stderr).toBe(0);
        // Half the weights stream from disk into the compute backend: onnxruntime fp32, or oneDNN bf16 where the CPU has
        // AVX-512/AMX (onnxruntime with a notice elsewhere).
        expect(r.stderr).toMatch(dtype === 'fp32' ? /weights stream from the host and disk tiers into onnxruntime/ : /weights stream from the host and disk tiers into (onednn-bf16|onnxruntime)/);
        const runDir = join(out, 'runs', 'v1', runName(name));
        expect(readdirSync(runDir).sort()).toEqual([...RUN_OUTPUT_FILES].sort());
        const outputs = readRunOutputs(runDir);
        expect(outputs.runSpec.adapter_spec.model).toBe(`local/${name}`);
        // 20 instances: HELM's split of the procedural scenario, each with a completion.
        expect(outputs.scenarioState.request_states).toHaveLength(20);
        for (const rs of outputs.scenarioState.request_states) expect(rs.result?.completions[0]?.tokens.length).toBeGreaterThan(0);
        expect(outputs.stats.find((s) => s.name.name === 'num_instances' && s.name.split === 'test')?.count).toBe(1);
      }, 240_000);
    }
  }

  it('refuses a folder of an unsupported model_type in one line naming the field (exit 2), before any work', () => {
    const folder = join(root, 'gpt2');
    cpSync(join(root, 'llama3'), folder, { recursive: true });
    writeFileSync(join(folder, 'config.json'), JSON.stringify({ ...JSON.parse(readFileSync(join(folder, 'config.json'), 'utf8')), model_type: 'gpt2' }));
    const out = join(root, 'out-gpt2');
    const r = flexhelm(['run', '-d', scenario, '-m', '4', '--model', folder, '--percent', '100', '0', '100', '0', '100', '0', '--output-path', out, '--data-dir', join(root, 'data'), '-t', '1']);
    expect(r.status).toBe(2);
    expect(r.stderr.trimEnd().split('\n').at(-1)).toBe(`flexhelm run: ${folder}/config.json: model_type is "gpt2"; supported: ${[...FAMILY_REGISTRY.keys()].join(', ')}`);
    expect(existsSync(join(out, 'runs'))).toBe(false);
  });

  it('resumes a Mistral-shaped run after kill -9 without recomputing, with the same files as an uninterrupted run', async () => {
    const args = ['run', '-d', scenario, '-m', '40', '--gpu-batch-size', '2', '--model', join(root, 'mistral'), '--percent', '0', '50', '100', '0', '100', '0', '--data-dir', join(root, 'data'), '-t', '1'];
    const cachePath = join(root, 'resume.sqlite');
    const killedOut = join(root, 'out-killed');
    const child = spawn(process.execPath, [main, ...args, '--output-path', killedOut, '--cache-path', cachePath], { stdio: 'ignore' });
    const cached = await waitForCachedRequests(cachePath, 4, 300);
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    expect(cached).toBeGreaterThanOrEqual(4);
    expect(cached).toBeLessThan(40);
    expect(existsSync(join(killedOut, 'runs', 'v1', runName('mistral'), 'stats.json'))).toBe(false);

    const resumed = flexhelm([...args, '--output-path', killedOut, '--cache-path', cachePath]);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(new RegExp(`\\(${cached} from cache\\)`));
    const freshOut = join(root, 'out-fresh');
    const fresh = flexhelm([...args, '--output-path', freshOut, '--cache-path', join(root, 'fresh.sqlite')]);
    expect(fresh.status, fresh.stderr).toBe(0);
    for (const f of RUN_OUTPUT_FILES) {
      expect(runFileWithoutTimings(join(killedOut, 'runs', 'v1', runName('mistral'), f), killedOut), f).toBe(
        runFileWithoutTimings(join(freshOut, 'runs', 'v1', runName('mistral'), f), freshOut),
      );
    }
  }, 600_000);
});
