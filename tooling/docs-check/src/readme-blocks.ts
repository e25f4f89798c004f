import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** A fenced code block of a Markdown file: its info string (`sh`, `sh no-run: why`, `ts`), text and first line. */
export interface FencedBlock {
  info: string;
  code: string;
  line: number;
}

/** The fenced (```) blocks of `markdown`, in order. An unclosed fence is an error naming its line. */
export function fencedBlocks(markdown: string, source: string): FencedBlock[] {
  const blocks: FencedBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`${source}:${start + 1}: code block never closed`);
    blocks.push({ info: open[1]!.trim(), code: body.join('\n'), line: start + 1 });
  }
  return blocks;
}

/**
 * A README's runnable TypeScript example: its first ```ts block, and what it prints — the text after `// → ` on its
 * lines, in order (each `console.log` line says what it prints).
 */
export function tsExample(markdown: string, source: string): { code: string; prints: string[] } {
  const block = fencedBlocks(markdown, source).find((b) => b.info === 'ts');
  if (!block) throw new Error(`${source}: no \`\`\`ts example`);
  const prints = [...block.code.matchAll(/\/\/ → (.*)$/gm)].map((m) => m[1]!);
  if (prints.length === 0) throw new Error(`${source}:${block.line}: the example says nothing of what it prints (// → …)`);
  return { code: block.code, prints };
}
