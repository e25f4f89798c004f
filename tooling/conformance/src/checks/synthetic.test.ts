import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { check } from './synthetic.js';

const GOLDEN = fileURLToPath(new URL('../../../../../shared/conformance/helm/synthetic.json', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'synthetic-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Config {
  config: string;
  counts: Record<string, number>;
  sha256_all: string;
  instances_by_split: Record<string, { input: { text: string } }[]>;
}

/** The golden file cut down to its (small) dyck_language config, optionally altered. */
function goldenWithDyckOnly(alter: (config: Config) => void = () => {}): string {
  const golden = JSON.parse(readFileSync(GOLDEN, 'utf8')) as { configs: Config[] };
  golden.configs = golden.configs.filter((c) => c.config.startsWith('dyck_language'));
  alter(golden.configs[0]!);
  const path = join(dir, `golden-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(golden));
  return path;
}

describe.skipIf(!existsSync(GOLDEN))('synthetic checker', () => {
  it('passes every case of an unaltered config and counts each one', async () => {
    const result = await check(goldenWithDyckOnly());
    // generate + counts + 203 stored instances + sha256 + 2 selections
    expect([result.passed, result.failed, result.failures]).toEqual([208, 0, []]);
  });

  it('reports each altered case separately, saying what differs', async () => {
    const result = await check(
      goldenWithDyckOnly((c) => {
        c.counts.test = 499;
        c.sha256_all = '0'.repeat(64);
        c.instances_by_split.test![5]!.input.text += ' )';
      }),
    );
    expect(result.passed).toBe(205);
    expect(result.failed).toBe(3);
    expect(result.failures[0]).toMatch(/^dyck_language:num_parenthesis_pairs=2 counts: differs/);
    expect(result.failures[1]).toMatch(/^dyck_language:num_parenthesis_pairs=2 test\[5\] \(id8\): differs at char/);
    expect(result.failures[2]).toMatch(/sha256_all: sha256 a43eec8f.*, expected 0000/);
  });
});
