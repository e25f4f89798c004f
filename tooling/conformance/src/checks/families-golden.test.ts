import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkerFor } from '../registry.js';
import { check } from './families-golden.js';

const SHARED = join(import.meta.dirname, '../../../../../shared/conformance/families');
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-families-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('families/ golden files', () => {
  it('are routed to the families checker', async () => {
    expect(typeof (await checkerFor('families/gemma2-a/golden.json'))).toBe('function');
  });

  it('a model_type the family registry lacks is not run, with the reason', async () => {
    mkdirSync(join(dir, 'deepseek-x'));
    const path = join(dir, 'deepseek-x', 'golden.json');
    writeFileSync(path, JSON.stringify({ config: { model_type: 'deepseek_v2' } }));
    const r = await check(path);
    expect(r).toMatchObject({ passed: 0, failed: 0, notRun: 1 });
    expect(r.notRunReasons![0]).toBe('deepseek-x: model_type deepseek_v2 not checked: the family registry has no such model_type');
  });

  it.skipIf(!existsSync(SHARED))('the public mixtral-a passes on the reference, onnxruntime (every dtype folder) and oneDNN bf16', async () => {
    const r = await check(join(SHARED, 'mixtral-a', 'golden.json'));
    expect(r.failed).toBe(0);
    expect(r.passed).toBeGreaterThan(100);
    expect(r.notes?.some((n) => n.includes('not implemented on'))).toBe(false);
  });
});
