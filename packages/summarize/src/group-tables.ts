import { adapterSpec, type AdapterSpec, type ObjectSpec, type Stat } from '@flexhelm/core';
import { copyStat, mergeStat, metricNameKey, newStat } from '@flexhelm/metrics';
import { comparePyStrings, formatPyFloat, formatPyInt, pyFloat, pyJsonDumps, pyRound3, pyStr, toNumber, type PyJsonValue, type PyNumber } from '@flexhelm/python-compat';
import { benchmarkingUrl } from './benchmarking-url.js';
import { exactMean } from './exact-mean.js';
import { BY_GROUP, NO_GROUPS, shortDisplayName, substituteMatcher, THIS_GROUP_ONLY, type HelmSchema, type MetricNameMatcher, type RunGroup } from './helm-schema.js';
import type { SuiteRun } from './read-suite-runs.js';
import { cell, headerCell, table, type Cell, type HeaderCell, type Table } from './table.js';
import type { SummarizeWarn } from './warning-digest.js';

/** An insertion-ordered map keyed by a value's equality (HELM keys dicts by frozen dataclasses). */
class ValueMap<K, V> {
  private readonly entries = new Map<string, { key: K; value: V }>();
  constructor(private readonly keyOf: (k: K) => string) {}
  getOrCreate(key: K, create: () => V): V {
    const id = this.keyOf(key);
    let entry = this.entries.get(id);
    if (!entry) {
      entry = { key, value: create() };
      this.entries.set(id, entry);
    }
    return entry.value;
  }
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    for (const { key, value } of this.entries.values()) yield [key, value];
  }
  get size(): number {
    return this.entries.size;
  }
}

/** `defaultdict` access: the value at `key`, inserted by `create` when missing. */
export function getOrInsert<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}

/** Python `==` on JSON-like values: ints and floats compare by value, dicts regardless of key order. */
function equalityKey(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) => {
    if (v instanceof Map) v = Object.fromEntries(v);
    if (v && typeof v === 'object' && !Array.isArray(v)) return Object.fromEntries(Object.entries(v as object).filter(([, x]) => x !== undefined).sort(([a], [b]) => comparePyStrings(a, b)));
    return v;
  });
}

const adapterKey = (spec: AdapterSpec) => equalityKey(spec);
const scenarioKey = (spec: ObjectSpec) => equalityKey(spec);
type AdapterRuns = ValueMap<AdapterSpec, SuiteRun[]>;
const newAdapterRuns = (): AdapterRuns => new ValueMap(adapterKey);

/** Python's `str(x)` of the number `process(x)` in `Stat.bare_str`: an int when integral, else `round(x, 3)`. */
function bareNumber(x: PyNumber): string {
  const v = toNumber(x);
  if (Number.isInteger(v)) return formatPyInt(v);
  return formatPyFloat(pyRound3(v));
}

/** HELM's `Stat.bare_str()`. */
export function statBareStr(stat: Stat): string {
  if (stat.count > 0) {
    return `min=${bareNumber(stat.min!)}, mean=${bareNumber(stat.mean!)}, max=${bareNumber(stat.max!)}, sum=${bareNumber(stat.sum)} (${stat.count})`;
  }
  return '(0)';
}

/** `MetricNameMatcher.matches(metric_name)`: a perturbed stat matches only its `worst` version. */
function matches(matcher: MetricNameMatcher, stat: Stat): boolean {
  const n = stat.name;
  if (matcher.name !== n.name || matcher.split !== n.split) return false;
  if (matcher.sub_split !== undefined && matcher.sub_split !== n.sub_split) return false;
  if (matcher.perturbation_name !== n.perturbation?.name) return false;
  return !(n.perturbation && n.perturbation.computed_on !== 'worst');
}

/** `get_unique_stat_by_matcher`: the one matching stat, sub-splits merged when the matcher names none. */
function uniqueStatByMatcher(stats: Stat[], matcher: MetricNameMatcher, warn: SummarizeWarn): Stat | undefined {
  let matching = stats.filter((s) => matches(matcher, s));
  if (matching.length === 0) {
    // HELM's fallback for prompting ablations: quasi_exact_match missing → exact_match.
    if (matcher.name !== 'quasi_exact_match') return undefined;
    warn('WARNING: No quasi_exact_match metric found, looking for exact_match instead', 'exact-match-fallback');
    const fallback = { ...matcher, name: 'exact_match' };
    matching = stats.filter((s) => matches(fallback, s));
    if (matching.length === 0) return undefined;
  }
  if (matcher.sub_split === undefined) {
    const merged = new Map<string, Stat>();
    for (const stat of matching) {
      const fresh = mergeStat(newStat({ ...stat.name, sub_split: undefined }), stat);
      const key = metricNameKey(fresh.name);
      const existing = merged.get(key);
      if (existing) mergeStat(existing, fresh);
      else merged.set(key, copyStat(fresh));
    }
    matching = [...merged.values()];
  }
  if (matching.length !== 1) throw new Error(`Expected 1 item, got ${matching.length} items matching ${matcher.name} (split ${matcher.split})`);
  return matching[0];
}

/** `dict_to_str(d)`: `k: v, …` with Python's `str(v)`. */
function dictToStr(entries: [string, unknown][]): string {
  return entries.map(([k, v]) => `${k}: ${pyStr(v as PyJsonValue)}`).join(', ');
}

function argsEntries(spec: ObjectSpec): [string, unknown][] {
  return Object.entries(spec.args);
}

/** `get_scenario_name(group, scenario_spec)`. */
function scenarioName(group: RunGroup, spec: ObjectSpec): string {
  return `${group.name}_${dictToStr(argsEntries(spec)).replaceAll(' ', '').replaceAll('/', '_')}`;
}

/** `get_coarse_adapter_spec`: only the `adapter_keys_shown` fields kept, the rest HELM's defaults. */
function coarseAdapterSpec(spec: AdapterSpec, keysShown: string[], scenario?: ObjectSpec): AdapterSpec {
  let instructions = spec.instructions;
  if (scenario?.class_name.endsWith('.MMLUScenario')) instructions = instructions.replaceAll(String(scenario.args.subject).replaceAll('_', ' '), '___');
  else if (scenario?.class_name.endsWith('.RAFTScenario')) instructions = '<scenario specific>';
  const source: Record<string, unknown> = { ...spec, instructions };
  const fields: Record<string, unknown> = {};
  for (const key of keysShown) {
    if (!(key in source)) throw new Error(`adapter_keys_shown names ${key}, which AdapterSpec does not have`);
    fields[key] = source[key];
  }
  return adapterSpec(fields as Partial<AdapterSpec>);
}

/** `asdict_without_nones(adapter_spec)` as ordered entries. */
function specEntries(spec: AdapterSpec): [string, unknown][] {
  return Object.entries(spec).filter(([, v]) => v !== undefined);
}

/** `unique_simplification(items, priority_keys)` from HELM's `common/general.py`. */
function uniqueSimplification(items: [string, unknown][][], priorityKeys: string[]): [string, unknown][][] {
  const get = (item: [string, unknown][], key: string) => item.find(([k]) => k === key)?.[1];
  const has = (item: [string, unknown][], key: string) => item.some(([k]) => k === key);
  // without_common_entries
  const first = items[0] ?? [];
  const common = first.filter(([key, value]) => items.every((item) => equalityKey(get(item, key)) === equalityKey(value))).map(([k]) => k);
  const stripped = items.map((item) => item.filter(([k]) => !common.includes(k)));
  const subitemKey = (item: [string, unknown][], keys: string[]) => equalityKey(keys.map((k) => get(item, k) ?? null));
  return stripped.map((item) => {
    const keys = [...priorityKeys.filter((k) => has(item, k)), ...item.map(([k]) => k).filter((k) => !priorityKeys.includes(k))];
    for (let i = 0; i < keys.length; i++) {
      const subkeys = keys.slice(0, i + 1);
      const id = subitemKey(item, subkeys);
      if (stripped.filter((other) => subitemKey(other, subkeys) === id).length === 1) {
        return subkeys.map((k) => [k, get(item, k) ?? null] as [string, unknown]);
      }
    }
    return item;
  });
}

const LOGPROBS_ISSUE_METRICS = new Set(['NDCG@10', 'RR@10', 'NDCG@20', 'RR@20', 'ece_1_bin', 'ece_10_bin', 'platt_ece_1_bin', 'platt_ece_10_bin', 'platt_coef', 'platt_intercept', 'selective_cov_acc_area', 'selective_acc@10']);

/** Python's `str.capitalize()` for the ASCII words HELM passes ("mean"). */
const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1).toLowerCase();

/** The part of HELM's `Summarizer` that builds tables: groups.json, groups_metadata.json and groups/<group>.json. */
export class GroupTables {
  private readonly groupAdapterToRuns = new Map<string, AdapterRuns>();
  private readonly groupScenarioAdapterToRuns = new Map<string, ValueMap<ObjectSpec, AdapterRuns>>();

  constructor(
    private readonly schema: HelmSchema,
    runs: SuiteRun[],
    private readonly warn: SummarizeWarn,
    private readonly verbose = false,
  ) {
    for (const run of runs) {
      const { scenario_spec: scenario, adapter_spec: adapter } = run.runSpec;
      for (const group of run.runSpec.groups) {
        this.adapterRuns(group).getOrCreate(adapter, () => []).push(run);
        this.scenarioAdapterRuns(group).getOrCreate(scenario, newAdapterRuns).getOrCreate(adapter, () => []).push(run);
      }
    }
  }

  // defaultdict lookups, as HELM does them
  private adapterRuns(group: string): AdapterRuns {
    return getOrInsert(this.groupAdapterToRuns, group, newAdapterRuns);
  }

  private scenarioAdapterRuns(group: string): ValueMap<ObjectSpec, AdapterRuns> {
    return getOrInsert(this.groupScenarioAdapterToRuns, group, () => new ValueMap(scenarioKey));
  }

  /** `expand_subgroups`: the group and, depth first, its subgroups (each once). */
  expandSubgroups(group: RunGroup): RunGroup[] {
    const visited = new Set<string>();
    const walk = (g: RunGroup): RunGroup[] => {
      if (visited.has(g.name)) return [];
      visited.add(g.name);
      return [g, ...g.subgroups.flatMap((name) => walk(this.schema.nameToRunGroup.get(name)!))];
    };
    return walk(group);
  }

  /** `filter_runs_by_visibility`. */
  private filterRunsByVisibility(runs: SuiteRun[], group: RunGroup): SuiteRun[] {
    return runs.filter((run) => {
      let included = group.visibility !== THIS_GROUP_ONLY;
      for (const name of run.runSpec.groups) {
        const runGroup = this.schema.nameToRunGroup.get(name);
        if (!runGroup) {
          this.warn(`WARNING: group ${name} mentioned in run spec ${run.runSpec.name} but undefined in schema.yaml, skipping`, 'group-undefined');
          continue;
        }
        if (runGroup.visibility === NO_GROUPS) return false;
        if (runGroup.visibility === THIS_GROUP_ONLY) {
          if (runGroup.name === group.name) return true;
          included = false;
        }
      }
      return included;
    });
  }

  /** `create_index_tables`: one table per category, one row per group with runs (groups.json). */
  indexTables(): Table[] {
    const byCategory = new Map<string, RunGroup[]>();
    for (const group of this.schema.run_groups) {
      if (!byCategory.has(group.category)) byCategory.set(group.category, []);
      byCategory.get(group.category)!.push(group);
    }
    const aggregateCell = (stats: Stat[], use: 'mean' | 'sum'): Cell => {
      if (stats.length === 0) return cell(undefined);
      const aggregate = copyStat(stats[0]!);
      for (const s of stats.slice(1)) mergeStat(aggregate, s);
      return cell(use === 'mean' ? aggregate.mean : aggregate.sum, { description: statBareStr(aggregate) });
    };
    const tables: Table[] = [];
    for (const [category, groups] of byCategory) {
      const header = [
        headerCell('Group'),
        headerCell('Description'),
        headerCell('Adaptation method', { description: 'Adaptation strategy (e.g., generation)' }),
        headerCell('# instances', { description: 'Number of instances evaluated on' }),
        headerCell('# references', { description: 'Number of references provided per instance' }),
        headerCell('# prompt tokens', { description: 'Total number of prompt tokens' }),
        headerCell('# completion tokens', { description: 'Total number of completion tokens' }),
        headerCell('# models', { description: "Number of models we're evaluating" }),
      ];
      const rows: Cell[][] = [];
      for (const group of groups) {
        // HELM collects these in sets; insertion order is what a single-method suite shows either way.
        const models = new Set<string>();
        const methods = new Set<string>();
        const collected: Record<string, Stat[]> = { num_instances: [], num_references: [], num_prompt_tokens: [], num_completion_tokens: [] };
        for (const subgroup of this.expandSubgroups(group)) {
          for (const [spec, runs] of this.adapterRuns(subgroup.name)) {
            const filtered = this.filterRunsByVisibility(runs, subgroup);
            models.add(spec.model);
            methods.add(spec.method);
            for (const run of filtered) for (const name of Object.keys(collected)) collected[name]!.push(...run.stats.filter((s) => s.name.name === name));
          }
        }
        if (collected.num_instances!.length === 0) continue;
        rows.push([
          cell(group.display_name, { href: benchmarkingUrl({ group: group.name }) }),
          cell(group.description, { markdown: true }),
          cell([...methods].join(', ')),
          aggregateCell(collected.num_instances!, 'mean'),
          aggregateCell(collected.num_references!, 'mean'),
          aggregateCell(collected.num_prompt_tokens!, 'sum'),
          aggregateCell(collected.num_completion_tokens!, 'sum'),
          cell(models.size),
        ]);
      }
      tables.push(table(category, header, rows));
    }
    return tables;
  }

  /** `create_groups_metadata` (groups_metadata.json). */
  groupsMetadata(): PyJsonValue {
    const out = new Map<string, PyJsonValue>();
    for (const g of this.schema.run_groups) {
      // A plain dict in HELM: None values stay as null.
      out.set(g.name, {
        display_name: g.display_name ?? null,
        description: g.description ?? null,
        taxonomy: g.taxonomy ? ({ ...g.taxonomy } as PyJsonValue) : null,
      });
    }
    return out;
  }

  /** `create_cell`: the runs' matching stats merged into one value, or None with why. */
  private createCell(runs: SuiteRun[], matcher: MetricNameMatcher, model: string): Cell {
    if (runs.length === 0) return cell(undefined, { description: 'No matching runs' });
    let aggregate: Stat | undefined;
    const aggregated: string[] = [];
    for (const run of runs) {
      const stat = uniqueStatByMatcher(run.stats, matcher, this.warn);
      if (!stat) {
        const nearMisses = run.stats.filter((s) => s.name.name === matcher.name).length;
        this.warn(`WARNING: run spec ${run.runSpec.name} does not have any stat matched by ${matcher.name} (split ${matcher.split}), ${nearMisses} near misses matching just the name`, 'stat-missing');
        continue;
      }
      if (!aggregate) aggregate = copyStat(stat);
      else mergeStat(aggregate, stat);
      aggregated.push(run.runSpec.name);
    }
    if (!aggregate) return cell(undefined, { description: `${runs.length} matching runs, but no matching metrics` });
    // HELM hides calibration and ranking metrics of one model whose logprobs were broken.
    const hidden = model === 'anthropic/stanford-online-all-v4-s3' && LOGPROBS_ISSUE_METRICS.has(matcher.name);
    let description = statBareStr(aggregate);
    if (this.verbose) description += ['\nRun specs:', ...aggregated].join('\n-- ');
    return cell(hidden ? undefined : aggregate.mean, { description, style: {} });
  }

  /** `create_group_table`: rows are adapters (models), columns (run group, metric) pairs. */
  createGroupTable(args: {
    name: string;
    title: string;
    adapterToRuns: AdapterRuns;
    linkToRuns: boolean;
    columns: [RunGroup, string][];
    subSplit?: string;
    addWinRate?: boolean;
  }): Table {
    const { name, title, adapterToRuns, linkToRuns, columns, subSplit } = args;
    if (columns.length === 0 || adapterToRuns.size === 0) {
      this.warn(`WARNING: table ${title}, has no rows or columns, leaving empty`, 'empty-table');
      return table('empty', [], []);
    }
    const header: HeaderCell[] = [headerCell('Model/adapter')];
    const matchers: MetricNameMatcher[] = [];
    const groupNames: string[] = [];
    const numGroups = new Set(columns.map(([g]) => g.name)).size;
    for (const [runGroup, metricGroupName] of columns) {
      if (!runGroup.metric_groups.includes(metricGroupName.replace('_detailed', ''))) continue;
      const metricGroup = this.schema.nameToMetricGroup.get(metricGroupName);
      if (!metricGroup) throw new Error(`metric group ${metricGroupName} is not defined in schema.yaml`);
      for (const metric of metricGroup.metrics) {
        let matcher = substituteMatcher(metric, runGroup.environment);
        if (subSplit !== undefined) matcher = { ...matcher, sub_split: subSplit };
        const field = this.schema.nameToMetric.get(matcher.name);
        if (!field) {
          this.warn(`WARNING: metric name ${matcher.name} undefined in schema.yaml, skipping`, 'metric-undefined');
          continue;
        }
        const metadata: Record<string, string> = { metric: shortDisplayName(field), run_group: shortDisplayName(runGroup) };
        let headerName = shortDisplayName(field);
        let description = `${runGroup.description !== undefined ? `${runGroup.description}\n\n` : ''}${field.display_name}: ${field.description}`;
        if (matcher.perturbation_name !== undefined) {
          const perturbation = this.schema.nameToPerturbation.get(matcher.perturbation_name);
          if (!perturbation) throw new Error(`perturbation ${matcher.perturbation_name} is not defined in schema.yaml`);
          headerName += ` (${shortDisplayName(perturbation)})`;
          description += `\n- Perturbation ${perturbation.display_name}: ${perturbation.description || '???'}`;
          metadata.perturbation = shortDisplayName(perturbation);
        }
        if (numGroups > 1) headerName = `${shortDisplayName(runGroup)} - ${headerName}`;
        header.push(headerCell(headerName, { description, lower_is_better: field.lower_is_better, metadata }));
        matchers.push(matcher);
        groupNames.push(runGroup.name);
      }
    }

    const firstGroup = columns[0]![0];
    const runSpecNamesToUrl = (names: string[]) =>
      benchmarkingUrl({ group: firstGroup.name, subgroup: title, runSpecs: pyJsonDumps(names) });

    // Models in the schema's order; models the schema does not know first, alphabetically.
    const modelOrder = this.schema.models.map((m) => m.name);
    const specs = [...adapterToRuns].sort(([a], [b]) => {
      const ia = modelOrder.indexOf(a.model);
      const ib = modelOrder.indexOf(b.model);
      return ia !== ib ? ia - ib : comparePyStrings(a.model, b.model);
    });
    const infos = uniqueSimplification(specs.map(([spec]) => specEntries(spec)), ['model']);

    const rows: Cell[][] = specs.map(([spec, runs], r) => {
      const modelDisplayName = this.schema.nameToModel.get(spec.model)?.display_name ?? spec.model;
      const info = infos[r]!.filter(([k]) => k !== 'model');
      const displayName = (modelDisplayName || '???') + (info.length > 0 ? ` [${dictToStr(info)}]` : '');
      const href = linkToRuns ? runSpecNamesToUrl(runs.map((run) => run.runSpec.name)) : undefined;
      // contamination.yaml is treated as empty: no ⚠/☠ marks, no contamination styles.
      const cells: Cell[] = [cell(displayName, { description: '', href })];
      groupNames.forEach((groupName, i) => {
        let groupRuns = runs.filter((run) => run.runSpec.groups.includes(groupName));
        // HELM: aggregate bAbI tables show the `task: all` runs only.
        if (groupName.includes('babi') && !name.includes('task:')) groupRuns = groupRuns.filter((run) => run.runSpec.name.includes('task=all'));
        cells.push(this.createCell(groupRuns, matchers[i]!, spec.model));
      });
      return cells;
    });

    const links: { text: string; href: string }[] = [];
    if (linkToRuns) {
      const all: string[] = [];
      for (const [spec, runs] of adapterToRuns) {
        if (runs.length > 1) this.warn(`WARNING: table row corresponding to adapter spec ${spec.model} has ${runs.length} > 1 runs: ${runs.map((r) => r.runSpec.name).join(', ')}`, 'several-runs-per-row');
        all.push(...runs.map((r) => r.runSpec.name));
      }
      if (all.length >= 2 && all.length <= 5) links.push({ text: 'compare all', href: runSpecNamesToUrl(all) });
    }
    const t = table(title, header, rows, { links, name });

    if (args.addWinRate) {
      const winRates = aggregateRowWinRates(t);
      t.header.splice(1, 0, headerCell(`${capitalize('mean')} win rate`, { description: 'How many models this model outperform on average (over columns).', lower_is_better: false }));
      for (const [i, row] of t.rows.entries()) row.splice(1, 0, cell(winRates[i] === undefined ? undefined : pyFloat(winRates[i]!)));
    }

    // Bold the best value of each comparable column.
    t.header.forEach((h, i) => {
      if (h.lower_is_better === undefined) return;
      const values = t.rows.map((row) => row[i]!.value).filter((v) => v !== undefined).map((v) => toNumber(v as PyNumber));
      if (values.length === 0) return;
      const best = h.lower_is_better ? Math.min(...values) : Math.max(...values);
      for (const row of t.rows) {
        const c = row[i]!;
        if (c.value !== undefined && toNumber(c.value as PyNumber) === best) row[i] = { ...c, style: { ...(c.style ?? {}), 'font-weight': 'bold' } };
      }
    });
    return t;
  }

  /** `create_group_tables_by_metric_group`: one table per metric group, subgroups as columns, with win rates. */
  tablesByMetricGroup(group: RunGroup): Table[] {
    const adapterToRuns = newAdapterRuns();
    const subgroups = this.expandSubgroups(group);
    for (const subgroup of subgroups) {
      for (const [spec, runs] of this.adapterRuns(subgroup.name)) {
        const coarse = coarseAdapterSpec(spec, group.adapter_keys_shown);
        const filtered = this.filterRunsByVisibility(runs, group);
        if (filtered.length > 0) adapterToRuns.getOrCreate(coarse, () => []).push(...filtered);
      }
    }
    let metricGroups: string[];
    if (group.metric_groups.length > 0) metricGroups = group.metric_groups;
    else {
      const all = subgroups.flatMap((s) => s.metric_groups);
      metricGroups = [...new Set(all)].filter((m) => !all.includes(`${m}_detailed`) && !group.subgroup_metric_groups_hidden.includes(m));
    }
    if (adapterToRuns.size === 0) return [];
    return metricGroups.map((metricGroup) =>
      this.createGroupTable({
        name: metricGroup,
        title: shortDisplayName(this.schema.nameToMetricGroup.get(metricGroup)!),
        adapterToRuns,
        columns: subgroups.map((s) => [s, metricGroup]),
        linkToRuns: false,
        addWinRate: true,
      }),
    );
  }

  /** `create_group_tables_by_subgroup`: per subgroup, an aggregate table (if several scenarios) and one per scenario. */
  tablesBySubgroup(group: RunGroup): Table[] {
    const all: Table[] = [];
    for (const subgroup of this.expandSubgroups(group)) {
      let tables: Table[] = [];
      let shown = 0;
      const columns = subgroup.metric_groups.map((m) => [subgroup, m] as [RunGroup, string]);
      for (const [scenario] of [...this.scenarioAdapterRuns(subgroup.name)]) {
        const name = scenarioName(subgroup, scenario);
        let title = dictToStr(argsEntries(scenario));
        if (!name.includes(group.name)) title = `${subgroup.display_name} ${title}`;
        const adapterToRuns = newAdapterRuns();
        // HELM looks the scenario up under the top group's name here (not the subgroup's).
        for (const [spec, runs] of this.scenarioAdapterRuns(group.name).getOrCreate(scenario, newAdapterRuns)) {
          const filtered = this.filterRunsByVisibility(runs, group);
          adapterToRuns.getOrCreate(coarseAdapterSpec(spec, group.adapter_keys_shown, scenario), () => []).push(...filtered);
        }
        if (adapterToRuns.size > 0 && subgroup.metric_groups.length > 0) {
          tables.push(this.createGroupTable({ title, name, adapterToRuns, columns, linkToRuns: true }));
          shown += 1;
          for (const subSplit of subgroup.sub_splits ?? []) {
            tables.push(
              this.createGroupTable({ title: `${subgroup.display_name} (sub-split: ${subSplit})`, name: `${subgroup.name}:sub_split=${subSplit}`, adapterToRuns, columns, linkToRuns: false, subSplit }),
            );
          }
        }
      }
      if (shown > 1) {
        const adapterToRuns = newAdapterRuns();
        for (const [spec, runs] of this.adapterRuns(subgroup.name)) {
          const filtered = this.filterRunsByVisibility(runs, group);
          adapterToRuns.getOrCreate(coarseAdapterSpec(spec, group.adapter_keys_shown), () => []).push(...filtered);
        }
        if (adapterToRuns.size > 0 && subgroup.metric_groups.length > 0) {
          tables = [this.createGroupTable({ title: String(subgroup.display_name), name: subgroup.name, adapterToRuns, columns, linkToRuns: false }), ...tables];
        }
      }
      all.push(...tables);
    }
    return all;
  }

  /** The tables of `groups/<group>.json` (before the LaTeX/JSON links are added). */
  groupTables(group: RunGroup): Table[] {
    if (group.subgroup_display_mode === BY_GROUP || this.expandSubgroups(group).length === 1) return this.tablesBySubgroup(group);
    return this.tablesByMetricGroup(group);
  }
}

/**
 * `compute_aggregate_row_win_rates(table, "mean")`: per comparable column with two or more values, each row's rank
 * normalised to [0, 1]; a row's mean over columns, or undefined if it was never compared.
 */
export function aggregateRowWinRates(t: Table): (number | undefined)[] {
  const perRow: number[][] = t.rows.map(() => []);
  t.header.forEach((h, i) => {
    if (h.lower_is_better === undefined) return;
    const values = t.rows
      .map((row, j) => [row[i]!, j] as const)
      .filter(([c]) => c.value !== undefined && c.contamination_level !== 'strong')
      .map(([c, j]) => [toNumber(c.value as PyNumber), j] as const);
    if (values.length < 2) return;
    // Python sorts (value, row) tuples; reverse=True when lower is better.
    const sorted = [...values].sort((a, b) => (a[0] !== b[0] ? a[0] - b[0] : a[1] - b[1]));
    if (h.lower_is_better) sorted.reverse();
    for (const [wins, [, j]] of sorted.entries()) perRow[j]!.push(wins / (values.length - 1));
  });
  return perRow.map((rates) => (rates.length === 0 ? undefined : exactMean(rates)));
}
