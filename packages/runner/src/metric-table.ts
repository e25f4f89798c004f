import { toNumber } from '@flexhelm/python-compat';
import type { Stat } from '@flexhelm/core';

/** The stats a person looks at first: HELM's headline metrics, on the eval split, unperturbed. */
const HEADLINE = [
  'exact_match', 'quasi_exact_match', 'prefix_exact_match', 'quasi_prefix_exact_match', 'f1_score', 'rouge_l', 'bleu_4',
  'math_equiv', 'equivalent', 'ece_10_bin', 'bits_per_byte', 'logprob', 'perplexity', 'classification_macro_f1',
  'num_prompt_tokens', 'num_output_tokens', 'inference_runtime', 'num_instances',
];

export interface MetricRow {
  name: string;
  split: string;
  perturbation: string;
  mean: number;
  count: number;
}

/** Headline rows of a run's stats (unperturbed and robustness/fairness worst cases), in HELM's metric order. */
export function headlineMetrics(stats: readonly Stat[]): MetricRow[] {
  const rows: MetricRow[] = [];
  // Worst-case rows only mean something when the run perturbed its instances.
  const perturbed = stats.some((s) => s.name.perturbation?.computed_on === 'perturbed');
  for (const name of HEADLINE) {
    for (const s of stats) {
      if (s.name.name !== name || s.mean === undefined || s.name.sub_split !== undefined) continue;
      const p = s.name.perturbation;
      if (p && !(perturbed && p.computed_on === 'worst' && (p.name === 'robustness' || p.name === 'fairness'))) continue;
      rows.push({ name, split: s.name.split ?? '', perturbation: p ? `${p.name} (worst)` : '', mean: toNumber(s.mean), count: s.count });
    }
  }
  return rows;
}

/** A fixed-width text table (for the terminal) or a markdown table. */
export function formatMetricTable(rows: readonly MetricRow[], markdown = false): string {
  const header = ['metric', 'split', 'perturbation', 'mean', 'count'];
  const body = rows.map((r) => [r.name, r.split, r.perturbation, Number.isInteger(r.mean) ? String(r.mean) : r.mean.toFixed(4), String(r.count)]);
  if (markdown) {
    return `${[`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, ...body.map((b) => `| ${b.join(' | ')} |`)].join('\n')}\n`;
  }
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return `${[line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n')}\n`;
}
