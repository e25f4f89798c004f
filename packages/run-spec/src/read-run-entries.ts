import { readFileSync } from 'node:fs';
import { HelmError, type RunEntry } from '@flexhelm/core';
import { z } from 'zod';
import { hoconLines, parseHocon } from './hocon.js';

const runEntrySchema = z.object({
  description: z.string({ error: 'description must be a string such as "mmlu:subject=anatomy,model=text"' }),
  priority: z.number({ error: 'priority must be an integer (1 is the highest priority)' }).int('priority must be an integer (1 is the highest priority)'),
  groups: z.array(z.string({ error: 'groups must be a list of strings' }), { error: 'groups must be a list of strings' }).nullish(),
});

const runEntriesSchema = z.object({
  entries: z.array(z.unknown(), { error: 'the file must have an `entries: [...]` list of {description, priority} objects' }),
});

/**
 * The run entries of one HOCON conf text (`{entries: [{description: "...", priority: 1, groups: [...]}, ...]}`), as
 * HELM's `read_run_entries` reads them (dacite: `groups` optional, unknown keys ignored).
 */
export function parseRunEntries(text: string, source = '<conf>'): RunEntry[] {
  const doc = parseHocon(text, source);
  const top = runEntriesSchema.safeParse(doc);
  if (!top.success) throw new HelmError('ValueError', `${source}: ${top.error.issues[0]!.message}`);
  return top.data.entries.map((raw, index) => {
    const line = typeof raw === 'object' && raw !== null ? hoconLines.get(raw) : undefined;
    const where = `${source}${line ? `:${line}` : ''}: entries[${index}]`;
    const parsed = runEntrySchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!; // a failed parse has at least one issue
      const field = issue.path.length ? `${issue.path.join('.')}: ` : '';
      const message = issue.code === 'invalid_type' && issue.path.length === 0 ? 'each entry must be an object {description: "...", priority: N}' : issue.message;
      throw new HelmError('TypeError', `${where}: ${field}${message}`);
    }
    const { description, priority, groups } = parsed.data;
    return groups === undefined || groups === null ? { description, priority } : { description, priority, groups };
  });
}

/** HELM's `read_run_entries(paths)`: the entries of every conf file, in order. */
export function readRunEntries(paths: string | readonly string[]): RunEntry[] {
  const list = typeof paths === 'string' ? [paths] : paths;
  return list.flatMap((path) => {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new HelmError('FileNotFoundError', `cannot read run entries from ${path}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
    }
    return parseRunEntries(text, path);
  });
}
