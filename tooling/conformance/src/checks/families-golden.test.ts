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

  it('a model_type the family registry lacks is not run, with the reason (mixtral: the MoE issue)', async () => {
    mkdirSync(join(dir, 'mixtral-x'));
    const path = join(dir, 'mixtral-x', 'golden.json');
    writeFileSync(path, JSON.stringify({ config: { model_type: 'mixtral' } }));
    const r = await check(path);
    expect(r).toMatchObject({ passed: 0, failed: 0, notRun: 1 });
    expect(r.notRunReasons![0]).toContain('mixtral-x: model_type mixtral not checked: mixtures of experts are the next issue');
  });

  it.skipIf(!existsSync(SHARED))('the public mixtral-a is reported the same way', async () => {
    const r = await check(join(SHARED, 'mixtral-a', 'golden.json'));
    expect(r.notRun).toBe(1);
    expect(r.failed).toBe(0);
  });
});
