#!/usr/bin/env node
// No compute backend imports another (vercel/ai's provider pattern): each backend package implements
// @flexhelm/contract over @flexhelm/engine and stands alone, so installing one never pulls another's runtime in
// (onnxruntime-node, the oneDNN addon). The reference backend lives in @flexhelm/engine, which every backend may use.
// A backend package may not list another in dependencies, peerDependencies or optionalDependencies, and none of its
// source files (src/) may import one. Tests and benchmarks may, only through a devDependency listed in ALLOWED below
// with the reason. Exits 1 naming each place. Part of `pnpm lint`.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The backend packages and their folders. */
export const BACKENDS = new Map([
  ['@flexhelm/ort-backend', 'packages/ort-backend'],
  ['@flexhelm/onednn-backend', 'packages/onednn-backend'],
  ['@flexhelm/offload', 'packages/offload'],
]);

/** Backend → other backend it may use in tests and benchmarks (as a devDependency), and why. */
export const ALLOWED = {
  '@flexhelm/offload': {
    '@flexhelm/ort-backend': 'the OffloadingBackend wraps a compute backend; its tests need one with streamed layers, which the reference backend lacks',
    '@flexhelm/onednn-backend': 'bench:offload measures the tiers over either compute backend (loaded by path from the bench only)',
  },
  '@flexhelm/onednn-backend': {
    '@flexhelm/ort-backend': 'its tests and benchmarks compare oneDNN against onnxruntime on the same weights',
    '@flexhelm/offload': 'its streamed-layer tests run it under the OffloadingBackend, the capability they exercise',
  },
};

/** A test or benchmark file: these may use an allowed devDependency. */
function isTestOrBench(path) {
  return /(^|\/)bench\//.test(path) || /\.test\.[cm]?[jt]s$/.test(path) || /(^|\/)test-[^/]*$/.test(path);
}

function* sourceFiles(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!['node_modules', 'dist', 'build', 'results'].includes(entry.name)) yield* sourceFiles(path);
    } else if (/\.([cm]?[jt]s)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) yield path;
  }
}

/** The backends `text` imports: by package name (static or dynamic), or by path into another backend's folder. */
export function importedBackends(text, self) {
  const found = new Set();
  for (const m of text.matchAll(/(?:from\s*|import\s*\(\s*|import\s+|require\s*\(\s*)(['"`])([^'"`]+)\1/g)) {
    const spec = m[2];
    for (const [name, dir] of BACKENDS) {
      if (name === self) continue;
      const folder = dir.split('/').pop();
      if (spec === name || spec.startsWith(`${name}/`) || new RegExp(`(^|/)\\.\\./${folder}/`).test(spec)) found.add(name);
    }
  }
  // Path imports built with new URL('../../<backend>/…', import.meta.url) load a backend too.
  for (const m of text.matchAll(/new URL\(\s*(['"`])([^'"`]+)\1\s*,\s*import\.meta\.url/g)) {
    for (const [name, dir] of BACKENDS) {
      if (name !== self && new RegExp(`(^|/)\\.\\./${dir.split('/').pop()}/`).test(m[2])) found.add(name);
    }
  }
  return [...found];
}

/** Every breach of the rule in the repository at `repo`, one line each. */
export function backendImportProblems(repo) {
  const problems = [];
  for (const [name, dir] of BACKENDS) {
    const pkgPath = join(repo, dir, 'package.json');
    if (!existsSync(pkgPath)) {
      problems.push(`${dir}: no package.json (BACKENDS in tooling/scripts/check-backend-imports.mjs names a package that is gone)`);
      continue;
    }
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
    const allowed = ALLOWED[name] ?? {};
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
      for (const dep of Object.keys(pkg[field] ?? {})) {
        if (BACKENDS.has(dep) && dep !== name) problems.push(`${dir}/package.json: ${field} names the backend ${dep}; a backend depends on @flexhelm/contract and @flexhelm/engine only`);
      }
    }
    for (const dep of Object.keys(pkg.devDependencies ?? {})) {
      if (BACKENDS.has(dep) && dep !== name && !allowed[dep]) problems.push(`${dir}/package.json: devDependencies names the backend ${dep} without a reason in ALLOWED (tooling/scripts/check-backend-imports.mjs)`);
    }
    const devDeps = new Set(Object.keys(pkg.devDependencies ?? {}));
    for (const sub of ['src', 'bench']) {
      for (const file of sourceFiles(join(repo, dir, sub))) {
        const rel = relative(repo, file);
        for (const other of importedBackends(readFileSync(file, 'utf8'), name)) {
          if (!isTestOrBench(rel)) problems.push(`${rel}: imports the backend ${other}; a backend's source may import @flexhelm/contract and @flexhelm/engine, never another backend`);
          else if (!allowed[other]) problems.push(`${rel}: a test or benchmark imports the backend ${other}, which ALLOWED does not list for ${name}`);
          else if (!devDeps.has(other) && !/\bnew URL\(/.test(readFileSync(file, 'utf8'))) problems.push(`${rel}: imports ${other}, which ${dir}/package.json does not list in devDependencies`);
        }
      }
    }
  }
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const repo = resolve(fileURLToPath(import.meta.url), '../../..');
  const problems = backendImportProblems(repo);
  if (problems.length) {
    console.error(problems.join('\n'));
    process.exit(1);
  }
  console.log(`check-backend-imports: no backend imports another (${[...BACKENDS.keys()].join(', ')})`);
}
