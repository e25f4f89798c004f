import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './readme-blocks.js';

const DOC = 'docs/architecture.md';
/** Used by most packages: the picture leaves their arrows out (the doc says so). */
const LEFT_OUT = new Set(['core', 'python-compat', 'atomic-write']);

/** Each workspace package's `@flexhelm/*` runtime dependencies, by short name (`apps/cli` for the apps). */
function declared(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const group of ['packages', 'apps']) {
    for (const dir of readdirSync(join(repoRoot, group))) {
      const file = join(repoRoot, group, dir, 'package.json');
      if (!existsSync(file)) continue;
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { dependencies?: Record<string, string> };
      const deps = Object.keys(pkg.dependencies ?? {}).filter((d) => d.startsWith('@flexhelm/')).map((d) => d.slice('@flexhelm/'.length));
      graph.set(group === 'apps' ? `apps/${dir}` : dir, deps.map((d) => (existsSync(join(repoRoot, 'apps', d, 'package.json')) ? `apps/${d}` : d)));
    }
  }
  return graph;
}

/** The arrows of the doc's mermaid picture, `from -> to` by package name (`a --> b & c` is two). */
function drawn(): Set<string> {
  const text = readFileSync(join(repoRoot, DOC), 'utf8');
  const block = /```mermaid\n([\s\S]*?)```/.exec(text)?.[1] ?? '';
  const names = new Map<string, string>();
  for (const m of block.matchAll(/(\w+)\["?([\w/-]+)"?\]/g)) names.set(m[1]!, m[2]!);
  const arrows = new Set<string>();
  for (const line of block.split('\n')) {
    const m = /^\s*(\w+)(?:\[[^\]]*\])?\s*-->\s*(.+)$/.exec(line);
    if (!m) continue;
    for (const target of m[2]!.split('&')) {
      const id = /^\s*(\w+)/.exec(target)![1]!;
      arrows.add(`${names.get(m[1]!) ?? m[1]} -> ${names.get(id) ?? id}`);
    }
  }
  return arrows;
}

describe(`${DOC}'s dependency picture`, () => {
  const graph = declared();
  const reach = (from: string, seen = new Set<string>()): Set<string> => {
    for (const to of graph.get(from) ?? []) if (!seen.has(to)) reach(to, seen.add(to));
    return seen;
  };
  const arrows = drawn();

  it('draws only dependencies the package.json files declare', () => {
    const wrong = [...arrows].filter((a) => {
      const [from, to] = a.split(' -> ') as [string, string];
      return !(graph.get(from) ?? []).includes(to);
    });
    expect(wrong.map((a) => `${a}: not a declared dependency; redraw from the package.json files`)).toEqual([]);
  });

  it('draws every declared dependency that no other arrow implies', () => {
    const missing: string[] = [];
    for (const [from, deps] of graph) {
      const kept = deps.filter((d) => !LEFT_OUT.has(d));
      for (const to of kept) {
        const implied = kept.some((other) => other !== to && reach(other).has(to));
        if (!implied && !arrows.has(`${from} -> ${to}`)) missing.push(`${from} -> ${to}`);
      }
    }
    expect(missing.map((a) => `${a}: declared but not drawn in ${DOC}`)).toEqual([]);
  });
});
