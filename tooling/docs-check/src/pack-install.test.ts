import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, tsExample } from './readme-blocks.js';

// The two packages a caller is most likely to take alone (HELM's run specs, HELM's metrics); their @flexhelm
// dependencies come along as tarballs, their other dependencies as tarballs of this clone's installed copies, and
// npm runs with --offline on an empty cache: nothing is fetched, nothing of the workspace is visible.
const PACKAGES = ['run-spec', 'metrics'];

describe('the public packages, packed and installed with plain npm outside the workspace', () => {
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-pack-'));
  const tarballs = join(dir, 'tarballs');
  const project = join(dir, 'project');
  let packed: string[] = [];

  beforeAll(() => {
    const out = execFileSync(process.execPath, [join(repoRoot, 'tooling/scripts/pack-public.mjs'), tarballs, ...PACKAGES.map((p) => `@flexhelm/${p}`), '--third-party'], { encoding: 'utf8' });
    packed = out.trim().split('\n');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--cache', join(dir, 'npm-cache'), ...packed], { cwd: project, encoding: 'utf8', stdio: 'pipe' });
  }, 240_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('packs each package with its @flexhelm dependencies, versions in place of workspace:*', () => {
    const names = packed.map((p) => p.split('/').at(-1));
    for (const n of ['flexhelm-run-spec-', 'flexhelm-metrics-', 'flexhelm-core-', 'flexhelm-python-compat-']) expect(names.some((f) => f?.startsWith(n))).toBe(true);
    for (const p of PACKAGES.concat('core', 'python-compat')) {
      const pkg = JSON.parse(readFileSync(join(project, 'node_modules/@flexhelm', p, 'package.json'), 'utf8'));
      expect(JSON.stringify(pkg.dependencies ?? {})).not.toContain('workspace:');
      expect(pkg.exports['.'].types).toBe('./dist/index.d.ts');
    }
  });

  it("runs each README's example under tsc --strict (NodeNext) and Node, printing what the README says", () => {
    const src = join(project, 'src');
    mkdirSync(src);
    const expected = new Map<string, string[]>();
    for (const p of PACKAGES) {
      const example = tsExample(readFileSync(join(repoRoot, 'packages', p, 'README.md'), 'utf8'), `packages/${p}/README.md`);
      writeFileSync(join(src, `${p}.ts`), example.code);
      expected.set(p, example.prints);
    }
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', outDir: 'out', rootDir: 'src', types: ['node'], typeRoots: [join(repoRoot, 'node_modules/@types')] },
        include: ['src'],
      }),
    );
    const tsc = spawnSync(process.execPath, [join(repoRoot, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: project, encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
    for (const [p, prints] of expected) {
      const run = spawnSync(process.execPath, [join(project, 'out', `${p}.js`)], { cwd: project, encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(run.stdout.trimEnd().split('\n')).toEqual(prints);
    }
  });

  it('loads with require() too where Node can load ES modules that way (Node ≥ 20.19)', () => {
    const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
    for (const p of PACKAGES) {
      const r = spawnSync(process.execPath, ['-e', `console.log(typeof require('@flexhelm/${p}'))`], { cwd: project, encoding: 'utf8' });
      if (major > 20 || (major === 20 && minor >= 19)) expect(r.stdout.trim()).toBe('object');
      // Older Node refuses with its own message, which names ES modules (not "No exports main defined").
      else expect(r.stderr).toMatch(/ERR_REQUIRE_ESM|ES Module/);
    }
  });

  it('ships what the README and the types need and no tests', () => {
    for (const p of PACKAGES) {
      const files = readdirSync(join(project, 'node_modules/@flexhelm', p, 'dist'));
      expect(files).toContain('index.d.ts');
      expect(files.filter((f) => f.includes('.test.'))).toEqual([]);
    }
  });
});
