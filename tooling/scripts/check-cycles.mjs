#!/usr/bin/env node
// No import cycles anywhere: between the files of each package and app, and between the workspace packages
// (their @flexhelm/* dependencies). Exits 1 and names each cycle found. `pnpm check-cycles`; also part of `pnpm lint`.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cycles, findImportCycles } from './import-cycles.mjs';

const repo = resolve(fileURLToPath(import.meta.url), '../../..');
const problems = [];
const packages = new Map();
for (const group of ['packages', 'apps']) {
  for (const name of readdirSync(join(repo, group))) {
    const dir = join(repo, group, name);
    if (!existsSync(join(dir, 'package.json'))) continue;
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    packages.set(pkg.name, Object.keys({ ...pkg.dependencies, ...pkg.devDependencies }).filter((d) => d.startsWith('@flexhelm/')));
    for (const cycle of findImportCycles(dir)) problems.push(`${group}/${name}: import cycle ${cycle}`);
  }
}
const graph = new Map([...packages].map(([name, deps]) => [name, new Set(deps.filter((d) => packages.has(d)))]));
for (const cycle of cycles(graph)) problems.push(`workspace packages depend on each other in a cycle: ${cycle.join(' ↔ ')}`);
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`check-cycles: no import cycles in ${packages.size} packages`);
