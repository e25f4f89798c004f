import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { readRunOutputs, RUN_OUTPUT_FILES } from '@flexhelm/runner';
import { runFileWithoutTimings } from '../run-file-without-timings.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-pad-'));
const modelDir = join(root, 'tiny');
// A fixed policy and the fp32 path: the two runs differ only in the padding.
const args = ['-d', 'synthetic_reasoning:mode=induction', '-m', '8', '--gpu-batch-size', '4', '--percent', '100', '0', '100', '0', '100', '0', '--compute-dtype', 'fp32', '--model', 'local/tiny-opt', '--path', modelDir, '--data-dir', join(root, 'data'), '-t', '1'];
const runName = 'synthetic_reasoning:mode=induction,model=local_tiny-opt';

function flexhelm(extra: string[]) {
  return spawnSync(process.execPath, [main, 'run', ...args, ...extra], { encoding: 'utf8', timeout: 240_000 });
}

/** Deep equality, numbers within 1e-5 relative; returns how many numbers were compared. */
function expectSameUpToRounding(a: unknown, b: unknown, path: string): number {
  if (typeof a === 'number' && typeof b === 'number') {
    expect(Math.abs(a - b), `${path}: ${a} vs ${b}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(b)));
    return 1;
  }
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    expect(Object.keys(a).sort(), path).toEqual(Object.keys(b).sort());
    let n = 0;
    for (const k of Object.keys(a)) n += expectSameUpToRounding((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`);
    return n;
  }
  expect(a, path).toEqual(b);
  return 0;
}

beforeAll(() => {
  makeTinyOptModel(modelDir, 5);
});

describe('flexhelm run --pad-to-seq-len', () => {
  it('pads the engine batches without changing any result, and refuses a prompt longer than N', () => {
    const plain = flexhelm(['--output-path', join(root, 'plain')]);
    expect(plain.stderr).not.toMatch(/internal error/);
    expect(plain.status).toBe(0);
    const padded = flexhelm(['--output-path', join(root, 'padded'), '--pad-to-seq-len', '200']);
    expect(padded.stderr).not.toMatch(/internal error/);
    expect(padded.status).toBe(0);

    // Left padding is masked and positions count real tokens: the same completions, and the same logprobs up to fp32
    // summation order (the padded shape changes how onnxruntime blocks its sums: ~1e-6 relative).
    let numbers = 0;
    for (const f of RUN_OUTPUT_FILES) {
      const a = JSON.parse(runFileWithoutTimings(join(root, 'padded', 'runs', 'v1', runName, f), join(root, 'padded')));
      const b = JSON.parse(runFileWithoutTimings(join(root, 'plain', 'runs', 'v1', runName, f), join(root, 'plain')));
      numbers += expectSameUpToRounding(a, b, f);
    }
    expect(numbers).toBeGreaterThan(100);
    const states = readRunOutputs(join(root, 'padded', 'runs', 'v1', runName)).scenarioState.request_states;
    expect(states).toHaveLength(8);
    expect(states.every((rs) => rs.result!.completions[0]!.tokens.length > 0)).toBe(true);

    // helm_run.py stops when a prompt does not fit the padded shape; so does flexhelm, saying what to give instead.
    const short = flexhelm(['--output-path', join(root, 'short'), '--pad-to-seq-len', '5']);
    expect(short.stderr).toMatch(/a prompt of \d+ tokens is longer than --pad-to-seq-len 5: give --pad-to-seq-len \d+ or more/);
    expect(short.status).toBe(2);
    expect(existsSync(join(root, 'short', 'runs', 'v1', runName, 'stats.json'))).toBe(false);

    const beyond = flexhelm(['--output-path', join(root, 'beyond'), '--pad-to-seq-len', '99999']);
    expect(beyond.stderr).toMatch(/--pad-to-seq-len 99999 is beyond the model's \d+ positions/);
    expect(beyond.status).toBe(2);
  }, 300_000);
});
