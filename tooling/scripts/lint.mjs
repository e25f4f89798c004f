#!/usr/bin/env node
// The project's own lint rules, run per package by `turbo run lint`:
//  - source files are kebab-case (a file is named after its main export);
//  - no import reaches into another workspace package's internals (`@flexhelm/x/src/...`, `../../other/src`);
//  - no focused tests (`it.only`, `describe.only`) are committed;
//  - no import cycles between the package's source files (import-cycles.mjs; check-cycles.mjs checks the whole repo).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { findImportCycles } from './import-cycles.mjs';

const root = resolve(process.argv[2] ?? '.');
const problems = [];
function walk(dir) {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry === 'dist' || entry === 'build' || entry.startsWith('.')) continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path);
    else if (/\.(ts|mts|js|mjs)$/.test(entry) && path.includes(`${join(root, 'src')}`)) check(path, entry);
  }
}
function check(path, entry) {
  const rel = relative(root, path);
  const base = entry.replace(/\.(test\.)?(ts|mts|js|mjs)$/, '').replace(/\.d$/, '');
  if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(base)) problems.push(`${rel}: file names are kebab-case`);
  const text = readFileSync(path, 'utf8');
  for (const m of text.matchAll(/from\s+['"]([^'"]+)['"]/g)) {
    const spec = m[1];
    if (/^@flexhelm\/[^/]+\/(src|dist)\//.test(spec)) problems.push(`${rel}: imports another package's internals (${spec}); use its public exports`);
    if (/^(\.\.\/){2,}.*\/(src|dist)\//.test(spec) && !resolve(path, '..', spec).startsWith(root)) problems.push(`${rel}: relative import into another package (${spec})`);
  }
  if (/\b(it|test|describe)\.only\(/.test(text)) problems.push(`${rel}: focused test (.only) left in`);
}
walk(root);
for (const cycle of findImportCycles(root)) problems.push(`import cycle: ${cycle} (move what both need into a file of its own, or pass an interface)`);
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
