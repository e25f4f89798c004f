import type { MetricRow } from '@flexhelm/runner';

export interface RunSummary {
  run: string;
  model: string;
  metrics: MetricRow[];
}

/** The run name without its `model=` argument: what the same description run for several models shares. */
const withoutModel = (run: string) => run.replace(/([:,])model=[^,]*(,|$)/, (_, before: string, after: string) => (after ? before : '')).replace(/:$/, '');

/**
 * Markdown tables of the runs that differ only in their model (`flexhelm run --model A --model B`): one per
 * description, a column per model, a row per headline metric. Empty when every description ran for one model only.
 */
export function sideBySideTables(runs: readonly RunSummary[]): string {
  const groups = new Map<string, RunSummary[]>();
  for (const r of runs) groups.set(withoutModel(r.run), [...(groups.get(withoutModel(r.run)) ?? []), r]);
  const tables: string[] = [];
  for (const [description, group] of groups) {
    if (new Set(group.map((g) => g.model)).size < 2) continue;
    const key = (m: MetricRow) => `${m.name}\u0000${m.split}\u0000${m.perturbation}`;
    const rows = new Map<string, MetricRow>();
    for (const g of group) for (const m of g.metrics) if (!rows.has(key(m))) rows.set(key(m), m);
    const value = (g: RunSummary, k: string) => {
      const m = g.metrics.find((x) => key(x) === k);
      return m === undefined ? '' : Number.isInteger(m.mean) ? String(m.mean) : m.mean.toFixed(4);
    };
    const header = ['metric', 'split', 'perturbation', ...group.map((g) => `\`${g.model}\``)];
    const lines = [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`];
    for (const [k, m] of rows) lines.push(`| ${[m.name, m.split, m.perturbation, ...group.map((g) => value(g, k))].join(' | ')} |`);
    tables.push(`## ${description}: models side by side\n\n${lines.join('\n')}\n`);
  }
  return tables.join('\n');
}
