import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// `flexhelm run --max-ram` refuses a policy that will not fit and names one that does: that one must then run (the cost
// model's prediction and the memory plan the engine checks must agree on what fits).
const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-max-ram-'));
const model = join(root, 'qwen2');
afterAll(() => rmSync(root, { recursive: true, force: true }));

function flexhelm(args: string[]) {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 240_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
const run = (tag: string, extra: string[]) =>
  flexhelm(['run', '-d', 'synthetic_reasoning:mode=pattern_match', '--max-eval-instances', '2', '-t', '1', '--model', model, '--offline', '--data-dir', join(root, 'data'), '--output-path', join(root, `out-${tag}`), ...extra]);

beforeAll(() => {
  const made = flexhelm(['make-model', '--config', '{"base":"qwen2-0.5b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024}', '--out', model]);
  expect(made.status, made.stderr).toBe(0);
  // The machine profile, as the first `--percent auto` run writes it.
  expect(run('profile', []).status).toBe(0);
}, 300_000);

describe('flexhelm run --max-ram refusals', () => {
  it('name a policy that then runs, from budgets where nothing fits to budgets where the request fits', () => {
    let named = 0;
    for (const gib of ['0.05', '0.12', '0.13', '0.14', '0.15', '0.2']) {
      for (const policy of [['--percent', '100', '0', '100', '0', '100', '0', '--gpu-batch-size', '8'], []]) {
        const r = run(`${gib}-${policy.length}`, ['--max-ram', gib, ...policy]);
        expect(r.stderr, gib).not.toMatch(/internal error/);
        if (r.status === 0) continue;
        expect(r.status, r.stderr).toBe(2);
        const fits = /a policy that fits: (--percent [\d ]+ --gpu-batch-size \d+ --num-gpu-batches \d+(?: --compress-weight)?)/.exec(r.stderr);
        if (!fits) {
          expect(r.stderr, gib).toMatch(/no policy fits: .*raise --max-ram/);
          continue;
        }
        named++;
        const again = run(`${gib}-named`, ['--max-ram', gib, ...fits[1]!.split(' ')]);
        expect(again.status, `--max-ram ${gib} ${fits[1]}: ${again.stderr}`).toBe(0);
      }
    }
    expect(named).toBeGreaterThan(0);
  }, 600_000);
});
