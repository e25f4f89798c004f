#!/usr/bin/env node
// Family knowledge lives in the family folders (packages/engine/src/families/<model_type>/): outside them, no source
// file names a family as a string literal ('opt', 'gemma2', …), so nothing branches on a family's name. Tests may name
// families (they build models of each). A line that defines a name another vocabulary shares with a family (llama.cpp
// calls SentencePiece tokenizers `llama`) says so with `// family-names: ok, <why>`. Exits 1 listing each place.
// The same pass keeps OPT's own config type (`OptConfig`) inside OPT's folder: past the loaders a model is a
// `ModelDescription`, so no other source file (bench scripts included; tests of OPT's folder may) names it.
// Part of `pnpm lint`.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(fileURLToPath(import.meta.url), '../../..');
const familiesDir = join(repo, 'packages/engine/src/families');
const families = readdirSync(familiesDir).filter((n) => statSync(join(familiesDir, n)).isDirectory());
const literal = new RegExp(`(['"\`])(${families.map((f) => f.replace(/[^a-z0-9_]/g, '')).join('|')})\\1`, 'g');

/** Source files of a package or app (its src/, tests and generated output left out). */
function* sources(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (path !== familiesDir && entry.name !== 'node_modules') yield* sources(path);
    } else if (/\.(ts|mts|cts)$/.test(entry.name) && !/\.(test|bench)\.ts$|^test-|\.d\.ts$/.test(entry.name)) yield path;
  }
}

const problems = [];
for (const group of ['packages', 'apps']) {
  for (const name of readdirSync(join(repo, group))) {
    const src = join(repo, group, name, 'src');
    if (!existsSync(src)) continue;
    for (const file of sources(src)) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        // A name another vocabulary shares (llama.cpp's `llama` tokenizer kind) is marked where it is defined, once.
        if (/\/\/ family-names: ok, \S/.test(line)) return;
        const code = line.replace(/\/\/.*$/, '');
        if (/^\s*(\*|\/\*)/.test(code)) return;
        for (const m of code.matchAll(literal)) problems.push(`${relative(repo, file)}:${i + 1}: names the family ${m[2]} (move this knowledge into packages/engine/src/families/${m[2]}/)`);
      });
    }
  }
}
const optFolder = join(familiesDir, 'opt');
/** Every non-test source file of a package or app (src/, bench/, …), OPT's folder and generated output left out. */
function* allSources(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (path !== optFolder && !['node_modules', 'dist', 'build'].includes(entry.name)) yield* allSources(path);
    } else if (/\.(ts|mts|cts|mjs|cjs|js)$/.test(entry.name) && !/\.(test|bench)\.ts$|\.d\.ts$/.test(entry.name)) yield path;
  }
}
for (const group of ['packages', 'apps']) {
  for (const name of readdirSync(join(repo, group))) {
    const root = join(repo, group, name);
    if (!statSync(root).isDirectory()) continue;
    for (const file of allSources(root)) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/\bOptConfig\b/.test(line)) problems.push(`${relative(repo, file)}:${i + 1}: names OptConfig, OPT's own config type (take or give a ModelDescription; OptConfig stays in packages/engine/src/families/opt/)`);
        });
    }
  }
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`check-family-names: no family named outside packages/engine/src/families (${families.join(', ')}), OptConfig only in families/opt`);
