import { describe, expect, it } from 'vitest';
import { runInProcess } from '../run-in-process.js';
import { instancesCommand } from './instances.js';

const flexhelm = (...args: string[]) => runInProcess(instancesCommand, args);

describe('flexhelm instances', () => {
  it('prints JSON lines with HELM ids, filtered by split and limited', async () => {
    const r = await flexhelm('-d', 'synthetic_reasoning:mode=pattern_match', '--split', 'valid', '--limit', '2');
    expect(r.status).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(
      '{"input": {"text": "Rules: + Z = = X | Z + X = = | Z X + = = | + X = Z = | Result: zebra + pear = ="}, ' +
        '"references": [{"output": {"text": "Z + X = ="}, "tags": ["correct"]}], "split": "valid", "id": "id1000"}',
    );
    expect(JSON.parse(lines[1]!).id).toBe('id1001');
  });

  it('--array prints the indented form HELM writes', async () => {
    const r = await flexhelm('-d', 'dyck_language:num_parenthesis_pairs=2,model=together/opt-175b', '--split', 'train', '--limit', '1', '--array');
    expect(r.stdout).toBe(
      [
        '[',
        '  {',
        '    "input": {',
        '      "text": "[ [ [ [ [ [ ] ] ] ]"',
        '    },',
        '    "references": [',
        '      {',
        '        "output": {',
        '          "text": " ] ]"',
        '        },',
        '        "tags": [',
        '          "correct"',
        '        ]',
        '      }',
        '    ],',
        '    "split": "train",',
        '    "id": "id0"',
        '  }',
        ']',
        '',
      ].join('\n'),
    );
  });

  it('--max-eval-instances applies HELM’s selection: all train, then eval in seed(0) permutation order', async () => {
    const counts = await flexhelm('-d', 'synthetic_reasoning:mode=induction', '-m', '3', '--counts');
    expect(JSON.parse(counts.stdout)).toEqual({ total: 1003, train: 1000, test: 1, valid: 2 });
    const evalIds = await flexhelm('-d', 'synthetic_reasoning:mode=induction', '-m', '3', '--split', 'eval');
    expect(evalIds.stdout.trimEnd().split('\n').map((l) => JSON.parse(l).id)).toEqual(['id10394', 'id1898', 'id3398']);
  });

  it('--run-instances uses the RunSpec’s own cap (numeracy: 100, not exceeded)', async () => {
    const r = await flexhelm('-d', 'numeracy:relation_type=linear,mode=standard', '--run-instances', '--counts');
    expect(r.stdout).toBe('{\n  "total": 200,\n  "train": 100,\n  "test": 100\n}\n');
  });

  it('explains bad usage and bad input', async () => {
    expect(await flexhelm()).toMatchObject({ status: 2, stderr: expect.stringContaining('--description D') });
    expect(await flexhelm('-d', 'synthetic_reasoning:mode=induction', '--split', 'dev')).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("--split must be one of train, valid, test, eval, got 'dev'"),
    });
    // An inherited property name is not a split (it used to reach Object.prototype and crash with a TypeError).
    expect(await flexhelm('-d', 'synthetic_reasoning:mode=induction', '--split', 'toString')).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("--split must be one of train, valid, test, eval, got 'toString'"),
    });
    expect(await flexhelm('-d', 'synthetic_reasoning:mode=induction', '--limit', '-1')).toMatchObject({ status: 2 });
    const badMode = await flexhelm('-d', 'synthetic_reasoning:mode=magic');
    expect(badMode.status).toBe(2);
    expect(badMode.stderr).toContain('Unsupported mode: magic');
  });
});
