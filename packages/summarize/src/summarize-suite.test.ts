import { cpSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { helmJson } from '@flexhelm/core';
import { formatPyFloat, pyJsonParse, pyRound3, toPlain } from '@flexhelm/python-compat';
import { readRunOutputs } from '@flexhelm/runner';
import { loadHelmSchema, type HelmSchema } from './helm-schema.js';
import { readGroupTables, readRunDisplay, readSuiteSummary } from './read-summary.js';
import { summarizeSuite } from './summarize-suite.js';
import { WarningDigest } from './warning-digest.js';
import { HAVE_HELM_SOURCE as haveHelm, HELM_SOURCE, makeTestSuite, TEST_MODELS } from './test-suite.js';


const root = mkdtempSync(join(tmpdir(), 'flexhelm-summarize-'));
// Relative on purpose: HELM writes the output path as typed into runs.json and the table links.
const out = relative(process.cwd(), join(root, 'out'));
let schema: HelmSchema;
let runNames: string[];

// biome-ignore lint/suspicious/noExplicitAny: parsed JSON, checked by the assertions
type Plain = Record<string, any>;
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON, checked by the assertions
const read = (path: string): any => toPlain(pyJsonParse(readFileSync(path, 'utf8')));
const suiteDir = () => join(out, 'runs', 'S');

/** The test's own aggregation of stats.json (HELM's Stat.merge by hand): sum over matching stats / their count. */
function meanOf(runDirs: string[], name: string, split = 'test'): { mean: number; sum: number; count: number; min: number; max: number } | undefined {
  let sum = 0;
  let count = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const dir of runDirs) {
    for (const s of read(join(suiteDir(), dir, 'stats.json')) as Plain[]) {
      if (s.name.name !== name || s.name.split !== split || s.name.perturbation) continue;
      sum += s.sum;
      count += s.count;
      if (s.count > 0) {
        min = Math.min(min, s.min);
        max = Math.max(max, s.max);
      }
    }
  }
  return count === 0 ? undefined : { mean: sum / count, sum, count, min, max };
}

/** HELM's `Stat.bare_str` of numbers: ints as ints, others rounded to 3 places. */
const bare = (x: number) => (Number.isInteger(x) ? String(x) : formatPyFloat(pyRound3(x)));

describe.skipIf(!haveHelm && !process.env.CI)('summarizeSuite on 2 models × 3 scenarios', () => {
  beforeAll(async () => {
    schema = await loadHelmSchema({ helmSourceDir: HELM_SOURCE, offline: true });
    runNames = await makeTestSuite(out, 'S', join(root, 'models'));
  }, 600_000);

  it('writes the files HELM 0.2.1 writes, with its names and nesting', () => {
    const warnings: string[] = [];
    const digest = new WarningDigest();
    const result = summarizeSuite({ outputPath: out, suite: 'S', schema, date: '2026-12-02', warn: (m, kind) => {
        warnings.push(m);
        digest.add(m, kind);
      },
    });
    expect(result.runs.map((r) => r.dirName)).toEqual([...runNames].sort());
    const files = new Set(result.files);
    for (const f of ['summary.json', 'runs.json', 'run_specs.json', 'groups.json', 'groups_metadata.json', 'costs.json']) expect(files).toContain(f);
    // The groups these runs belong to, and the parents that include them as subgroups.
    for (const g of ['synthetic_reasoning', 'synthetic_reasoning_natural', 'dyck_language', 'reasoning', 'targeted_evaluations']) expect(files).toContain(`groups/${g}.json`);
    for (const run of runNames) for (const f of ['instances.json', 'display_predictions.json', 'display_requests.json']) expect(files).toContain(`${run}/${f}`);
    // No temporaries left behind.
    expect(readdirSync(suiteDir()).filter((n) => n.includes('.tmp-'))).toEqual([]);

    expect(read(join(suiteDir(), 'summary.json'))).toEqual({ suite: 'S', date: '2026-12-02' });
    // Python's json.dumps(..., indent=2): our own writer's output, re-parsed and re-written, is unchanged.
    for (const f of result.files) {
      if (!f.endsWith('.json')) continue;
      const text = readFileSync(join(suiteDir(), f), 'utf8');
      expect(helmJson(pyJsonParse(text)), f).toBe(text);
    }
    // HELM warns that the natural-language runs have no quasi_exact_match (synthetic_reasoning's main metric).
    expect(warnings).toContain('WARNING: No quasi_exact_match metric found, looking for exact_match instead');
    // The digest: every line kept, one count per kind, and a single line that sums them.
    expect(digest.messages).toEqual(warnings);
    const fallbacks = warnings.filter((w) => w.includes('No quasi_exact_match')).length;
    expect(fallbacks).toBeGreaterThan(1);
    expect(digest.counts.get('exact-match-fallback')).toBe(fallbacks);
    expect([...digest.counts.values()].reduce((a, b) => a + b, 0)).toBe(warnings.length);
    const line = digest.line()!;
    expect(line).not.toContain('\n');
    expect(line).toMatch(new RegExp(`^${warnings.length} HELM warnings: `));
    expect(line).toContain(`${fallbacks} no quasi_exact_match, exact_match used`);
    expect(new WarningDigest().line()).toBeUndefined();
  });

  it('runs.json and run_specs.json hold each run as HELM reads it', () => {
    const runs = read(join(suiteDir(), 'runs.json')) as Plain[];
    const specs = read(join(suiteDir(), 'run_specs.json')) as Plain[];
    expect(runs.map((r) => Object.keys(r))).toEqual(runs.map(() => ['run_path', 'run_spec', 'stats']));
    runs.forEach((run, i) => {
      const dir = [...runNames].sort()[i]!;
      expect(run.run_path).toBe(`${out}/runs/S/${dir}`);
      expect(run.run_spec).toEqual(read(join(suiteDir(), dir, 'run_spec.json')));
      expect(run.stats).toEqual(read(join(suiteDir(), dir, 'stats.json')));
      expect(specs[i]).toEqual(run.run_spec);
    });
  });

  it('groups.json: one index table per schema category, a row per group with runs, numbers from stats.json', () => {
    const tables = readSuiteSummary(out, 'S').groups;
    const categories = [...new Set(schema.run_groups.map((g) => g.category))];
    expect(tables.map((t) => t.title)).toEqual(categories);
    const scenarios = tables.find((t) => t.title === 'Scenarios')!;
    expect(scenarios.header.map((h) => h.value)).toEqual(['Group', 'Description', 'Adaptation method', '# instances', '# references', '# prompt tokens', '# completion tokens', '# models']);
    expect(scenarios.rows.map((r) => r[0]!.value)).toEqual(['Dyck', 'Synthetic reasoning (abstract symbols)', 'Synthetic reasoning (natural language)']);
    const dyck = scenarios.rows[0]!;
    expect(dyck[0]).toEqual({ value: 'Dyck', href: '?group=dyck_language', markdown: false });
    expect(dyck[1]).toEqual({ value: schema.nameToRunGroup.get('dyck_language')!.description, markdown: true });
    expect(dyck[2]!.value).toBe('generation');
    expect(dyck[7]!.value).toBe(2);
    // # instances: the mean over every num_instances stat (all splits) of the group's runs.
    const dyckRuns = runNames.filter((n) => n.startsWith('dyck'));
    const instances = dyckRuns.flatMap((d) => (read(join(suiteDir(), d, 'stats.json')) as Plain[]).filter((s) => s.name.name === 'num_instances'));
    const total = instances.reduce((a, s) => a + s.sum, 0);
    const count = instances.reduce((a, s) => a + s.count, 0);
    expect(dyck[3]!.value).toBeCloseTo(total / count, 12);
    const tokens = dyckRuns.flatMap((d) => (read(join(suiteDir(), d, 'stats.json')) as Plain[]).filter((s) => s.name.name === 'num_prompt_tokens'));
    expect(dyck[5]!.value).toBeCloseTo(tokens.reduce((a, s) => a + s.sum, 0), 9);
    // A category without runs keeps its header and has no rows.
    expect(tables.find((t) => t.title === 'Core scenarios')!.rows).toEqual([]);
  });

  it('groups_metadata.json lists every run group of the schema', () => {
    const meta = readSuiteSummary(out, 'S').groupsMetadata;
    expect(Object.keys(meta)).toEqual(schema.run_groups.map((g) => g.name));
    expect(meta.dyck_language).toEqual({
      display_name: 'Dyck',
      description: schema.nameToRunGroup.get('dyck_language')!.description,
      taxonomy: { task: 'next-word prediction', what: 'Dyck formal language', when: 'n/a', who: 'n/a', language: 'synthetic' },
    });
  });

  it('per-scenario leaderboards: models as rows, the metric groups as columns, values and descriptions from stats.json', () => {
    const tables = readGroupTables(out, 'S', 'synthetic_reasoning')!;
    // Two scenarios in the group: the aggregate table first, then one per scenario.
    expect(tables.map((t) => [t.title, t.name])).toEqual([
      ['Synthetic reasoning (abstract symbols)', 'synthetic_reasoning'],
      ['mode: pattern_match', 'synthetic_reasoning_mode:pattern_match'],
      ['difficulty: easy', 'synthetic_reasoning_difficulty:easy'],
    ]);
    const byScenario = tables[1]!;
    expect(byScenario.header.map((h) => h.value)).toEqual(['Model/adapter', 'EM', 'Denoised inference time (s)', '# eval', '# train', 'truncated', '# prompt tokens', '# output tokens', '# trials']);
    expect(byScenario.header[1]).toEqual({
      value: 'EM',
      description: `${schema.nameToRunGroup.get('synthetic_reasoning')!.description}\n\nQuasi-exact match: ${schema.nameToMetric.get('quasi_exact_match')!.description}`,
      markdown: false,
      lower_is_better: false,
      metadata: { metric: 'EM', run_group: 'Synthetic reasoning (abstract symbols)' },
    });
    // Models in the schema's order: OPT (175B) is listed before OPT (66B) there.
    expect(byScenario.rows.map((r) => r[0]!.value)).toEqual(['OPT (175B)', 'OPT (66B)']);
    const runFor = (model: string) => runNames.find((n) => n.startsWith('synthetic_reasoning:') && n.endsWith(model.replace('/', '_')))!;
    for (const [i, model] of [TEST_MODELS[1], TEST_MODELS[0]].entries()) {
      const row = byScenario.rows[i]!;
      const runs = [runFor(model)];
      expect(row[0]!.href).toBe(`?group=synthetic_reasoning&subgroup=mode%3A%20pattern_match&runSpecs=%5B%22${encodeURIComponent(runs[0]!)}%22%5D`);
      const em = meanOf(runs, 'quasi_exact_match')!;
      expect(row[1]!.value).toBeCloseTo(em.mean, 12);
      expect(row[1]!.description).toBe(`min=${bare(em.min)}, mean=${bare(em.mean)}, max=${bare(em.max)}, sum=${bare(em.sum)} (${em.count})`);
      const tokens = meanOf(runs, 'num_prompt_tokens')!;
      expect(row[6]!.value).toBeCloseTo(tokens.mean, 9);
    }
    // The best value of each comparable column is bold; ties are all bold.
    for (let c = 1; c < byScenario.header.length; c++) {
      const lower = byScenario.header[c]!.lower_is_better;
      if (lower === undefined) {
        expect(byScenario.rows.every((r) => !r[c]!.style?.['font-weight'])).toBe(true);
        continue;
      }
      const values = byScenario.rows.map((r) => r[c]!.value as number);
      const best = lower ? Math.min(...values) : Math.max(...values);
      for (const r of byScenario.rows) expect(r[c]!.style).toEqual(r[c]!.value === best ? { 'font-weight': 'bold' } : {});
    }
    expect(byScenario.links.map((l) => l.text)).toEqual(['compare all', 'LaTeX', 'JSON']);
    expect(byScenario.links[2]!.href).toBe(`${out}/runs/S/groups/json/synthetic_reasoning_synthetic_reasoning_mode:pattern_match.json`);
    expect(read(join(suiteDir(), 'groups/json/synthetic_reasoning_synthetic_reasoning_mode:pattern_match.json'))).toEqual(byScenario);

    // The natural-language runs have neither quasi_exact_match nor exact_match: "no matching metrics", no value.
    const natural = tables[2]!;
    expect(natural.rows[0]![1]).toEqual({ description: '1 matching runs, but no matching metrics', markdown: false });
    // The aggregate table merges both scenarios' runs per model.
    const aggregate = tables[0]!;
    const bothRuns = runNames.filter((n) => n.startsWith('synthetic_reasoning') && n.endsWith('opt-175b'));
    expect(aggregate.rows[0]![6]!.value).toBeCloseTo(meanOf(bothRuns, 'num_prompt_tokens')!.mean, 9);
  });

  it('group tables by metric group carry the mean win rate over columns', () => {
    const tables = readGroupTables(out, 'S', 'reasoning')!;
    expect(tables.map((t) => t.name)).toEqual(['accuracy', 'efficiency', 'general_information', 'apps_metrics']);
    const efficiency = tables[1]!;
    expect(efficiency.header[1]).toEqual({ value: 'Mean win rate', description: 'How many models this model outperform on average (over columns).', markdown: false, lower_is_better: false, metadata: {} });
    expect(efficiency.header[2]!.value).toBe('Synthetic reasoning (abstract symbols) - Denoised inference time (s)');
    // Recompute: per column with two values, the faster model wins (lower is better); mean over columns.
    const columns = efficiency.header.slice(2).map((_, k) => k + 2).filter((c) => efficiency.rows.every((r) => r[c]!.value !== undefined));
    expect(columns.length).toBe(3);
    const wins = efficiency.rows.map((row) => columns.reduce((n, c) => n + (efficiency.rows.every((other) => (row[c]!.value as number) <= (other[c]!.value as number)) ? 1 : 0), 0) / columns.length);
    expect(efficiency.rows.map((r) => r[1]!.value)).toEqual(wins);
    // Columns of groups without runs: "No matching runs", no value.
    const babi = efficiency.header.findIndex((h) => h.value === 'bAbI - Denoised inference time (s)');
    expect(efficiency.rows[0]![babi]).toEqual({ description: 'No matching runs', markdown: false });
    const latex = readFileSync(join(suiteDir(), 'groups/latex/reasoning_efficiency.tex'), 'utf8');
    expect(latex.split('\n')[0]).toBe('\\begin{table*}[htp]');
    expect(latex).toContain('\\caption{Results for efficiency (reasoning)}');
    // Blank columns (bAbI and the rest) are left out of the LaTeX table.
    expect(latex).not.toContain('bAbI');
  });

  it('costs.json sums the split-less token and request counts per model', () => {
    const costs = readSuiteSummary(out, 'S').costs;
    expect(Object.keys(costs).sort()).toEqual([...TEST_MODELS].sort());
    for (const model of TEST_MODELS) {
      const dirs = runNames.filter((n) => n.endsWith(model.replace('/', '_')));
      const sum = (name: string) => dirs.flatMap((d) => (read(join(suiteDir(), d, 'stats.json')) as Plain[]).filter((s) => s.name.name === name && !s.name.split)).reduce((a, s) => a + s.sum, 0);
      expect(costs[model]).toMatchObject({ num_requests: sum('num_requests'), num_completions: sum('num_completions'), num_prompt_tokens: sum('num_prompt_tokens') });
      expect(costs[model]!.total_tokens).toBe(costs[model]!.num_prompt_tokens! + costs[model]!.num_completion_tokens!);
    }
  });

  it('each run gets its display files: instances, predictions with their stats, requests', () => {
    for (const dir of runNames) {
      const display = readRunDisplay(out, 'S', dir);
      const outputs = readRunOutputs(join(suiteDir(), dir));
      const states = outputs.scenarioState.request_states;
      expect(display.predictions).toHaveLength(states.length);
      expect(display.requests).toHaveLength(states.length);
      expect(display.instances.map((i) => i.id)).toEqual([...new Set(states.map((s) => s.instance.id))]);
      states.forEach((rs, i) => {
        const p = display.predictions[i]!;
        expect(Object.keys(p)).toEqual(['instance_id', 'train_trial_index', 'predicted_text', 'stats']);
        expect(p.predicted_text).toBe(rs.result!.completions[0]!.text);
        // The stats are the per-instance means of the metrics the run's groups show (unperturbed).
        const perInstance = outputs.perInstanceStats.find((s) => s.instance_id === rs.instance.id)!;
        for (const [name, value] of Object.entries(p.stats)) expect(value).toBe(Number(perInstance.stats.find((s) => s.name.name === name)!.mean));
        expect(display.requests[i]!.request.prompt).toBe(rs.request.prompt);
      });
      const shown = Object.keys(display.predictions[0]!.stats);
      expect(shown).toContain('num_prompt_tokens');
      expect(shown).not.toContain('logprob');
      // cattrs makes Request's float fields floats: temperature 0.0, top_p 1.0.
      const text = readFileSync(join(suiteDir(), dir, 'display_requests.json'), 'utf8');
      expect(text).toContain('"temperature": 0.0,');
      expect(text).toContain('"top_p": 1.0,');
    }
  });

  it('running it again rewrites the same bytes', () => {
    const before = new Map(['runs.json', 'groups.json', 'groups/reasoning.json', `${runNames[0]}/display_predictions.json`].map((f) => [f, readFileSync(join(suiteDir(), f), 'utf8')]));
    summarizeSuite({ outputPath: out, suite: 'S', schema, date: '2026-12-02' });
    for (const [f, text] of before) expect(readFileSync(join(suiteDir(), f), 'utf8')).toBe(text);
  });

  it('a copy of the suite under another output path differs only in the paths HELM writes', () => {
    const copy = join(root, 'copy');
    cpSync(out, copy, { recursive: true });
    summarizeSuite({ outputPath: copy, suite: 'S', schema, date: '2026-12-02' });
    const a = readFileSync(join(suiteDir(), 'groups/dyck_language.json'), 'utf8');
    const b = readFileSync(join(copy, 'runs/S/groups/dyck_language.json'), 'utf8');
    expect(b.replaceAll(`${copy}/runs/S`, `${out}/runs/S`)).toBe(a);
  });
});
