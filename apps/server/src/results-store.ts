import { closeSync, existsSync, fstatSync, openSync, readdirSync, readSync, realpathSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import { equalMassBins } from '@flexhelm/metrics';
import { ApiError } from './api-error.js';

/**
 * Read-only access to a HELM output folder's finished suites, in HELM 0.2.1's formats: what `helm-summarize` writes
 * (`runs/<suite>/run_specs.json`, `groups.json`, `groups/<group>.json`, each run's `instances.json`,
 * `display_predictions.json`, `display_requests.json`) and what a run writes (`run_spec.json`, `stats.json`,
 * `scenario.json`, `scenario_state.json`, `per_instance_stats.json`). Every name from a URL is checked and every
 * path resolved inside the folder; a missing or broken file is an `ApiError` saying which file and what to do.
 */

// biome-ignore lint/suspicious/noExplicitAny: HELM's JSON is read as found and checked where it is used
type Json = any;

/** One prediction as `display_predictions.json` holds it. */
interface DisplayPrediction {
  instance_id: string;
  perturbation?: { name: string; [k: string]: unknown } | null;
  train_trial_index: number;
  predicted_text: string;
  truncated_predicted_text?: string | null;
  mapped_output?: string | null;
  reference_index?: number | null;
  stats: Record<string, number>;
}

interface Instance {
  id: string;
  input: { text: string };
  references: { output: { text: string }; tags: string[] }[];
  split?: string;
  sub_split?: string;
  perturbation?: { name: string; [k: string]: unknown } | null;
}

export interface ResultsStoreOptions {
  /** The HELM output folder (holds `runs/<suite>/`). */
  outputPath: string;
  /** Only this suite is shown. */
  suite?: string;
  /** Largest JSON file read (bytes). Default 512 MiB. */
  maxFileBytes?: number;
}

const MAX_PAGE_SIZE = 200;
/** Stats that say whether a prediction was right, most specific first (HELM's exact-match family). */
const CORRECTNESS = ['exact_match', 'quasi_exact_match', 'prefix_exact_match', 'quasi_prefix_exact_match', 'exact_match_indicator', 'math_equiv'];

const notFound = (message: string) => new ApiError(404, message, 'invalid_request_error', null, 'not_found');
const isBase = (x: { perturbation?: unknown }) => x.perturbation === undefined || x.perturbation === null;

export class ResultsStore {
  private readonly root: string;
  private readonly cache = new Map<string, { key: string; value: Json }>();
  private readonly maxFileBytes: number;

  constructor(private readonly options: ResultsStoreOptions) {
    this.root = options.outputPath;
    this.maxFileBytes = options.maxFileBytes ?? 512 * 1024 * 1024;
  }

  /** Suites that have a `runs/<suite>/` folder (only the chosen one with `suite`). */
  suites(): string[] {
    const runs = join(this.root, 'runs');
    if (!existsSync(runs)) return [];
    const all = readdirSync(runs, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
    return this.options.suite ? all.filter((s) => s === this.options.suite) : all;
  }

  /** The suite page: HELM's summary, its group index tables and its runs (from `run_specs.json`). */
  suite(suite: string): Json {
    const dir = this.suiteDir(suite);
    // Before `flexhelm summarize` there are only run folders: list them and say which command writes the rest.
    if (!existsSync(join(dir, 'run_specs.json'))) return { suite, summarized: false, command: `flexhelm summarize --suite ${suite}`, runs: this.runFolders(dir) };
    const runSpecs = this.readJson(dir, 'run_specs.json', `run \`flexhelm summarize --suite ${suite}\``);
    if (!Array.isArray(runSpecs)) throw this.malformed(dir, 'run_specs.json', 'a list of run specs');
    return {
      suite,
      summarized: true,
      summary: this.readOptional(dir, 'summary.json'),
      groups: asArray(this.readOptional(dir, 'groups.json')).filter(isObject),
      costs: isObject(this.readOptional(dir, 'costs.json')) ? this.readOptional(dir, 'costs.json') : {},
      runs: runSpecs.map((spec: Json) => runEntry(spec)),
    };
  }

  /** The run folders of a suite not summarized yet, each with what its run_spec.json says and whether it finished. */
  private runFolders(dir: string): Json[] {
    const entries = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== 'eval_cache' && d.name !== 'groups');
    return entries
      .map((d) => d.name)
      .sort()
      .map((name) => {
        let spec: Json = null;
        try {
          spec = this.readOptional(join(dir, name), 'run_spec.json');
        } catch {
          // A broken run_spec.json is listed by its folder name; summarize will name the file.
        }
        return { ...runEntry(spec ?? { name }), name, finished: existsSync(join(dir, name, 'stats.json')) };
      });
  }

  /** One group's leaderboard tables (`groups/<group>.json`) and its metadata. */
  group(suite: string, group: string): Json {
    const dir = this.suiteDir(suite);
    const tables = this.readJson(this.child(dir, 'groups', 'folder'), this.fileName(`${group}.json`, 'group'), `no group ${group} in suite ${suite}; the suite page lists its groups`);
    if (!Array.isArray(tables)) throw this.malformed(dir, `groups/${group}.json`, 'a list of tables');
    const all = this.readOptional(dir, 'groups_metadata.json');
    const metadata = isObject(all) && isObject(all[group]) ? all[group] : null;
    return { suite, group, metadata, tables };
  }

  /** A run page: run spec (with its adapter spec), scenario description and every stat. */
  run(suite: string, run: string): Json {
    const dir = this.runDir(suite, run);
    const runSpec = this.readJson(dir, 'run_spec.json', 'the run is unfinished or was deleted');
    const stats = this.readJson(dir, 'stats.json', 'the run is unfinished');
    if (!Array.isArray(stats)) throw this.malformed(dir, 'stats.json', 'a list of stats');
    const scenario = this.readOptional(dir, 'scenario.json');
    const instances = this.instanceList(dir);
    return {
      suite,
      run,
      runSpec,
      scenario: scenario && { name: scenario.name, description: scenario.description, tags: scenario.tags },
      stats,
      numInstances: instances.filter(isBase).length,
      // Other models' runs of the same scenario, for the comparison picker.
      comparable: this.comparableRuns(suite, runSpec),
    };
  }

  /** One page of a run's instances with each one's unperturbed prediction (first trial). `query` filters by text. */
  instances(suite: string, run: string, page: number, size: number, query = ''): Json {
    const dir = this.runDir(suite, run);
    checkPaging(page, size);
    const predictions = this.predictionIndex(dir);
    const needle = query.toLowerCase();
    const matching = this.instanceList(dir).filter(isBase).filter((i) => !needle || searchable(i, predictions.get(i.id)).includes(needle));
    const items = matching.slice((page - 1) * size, page * size).map((i) => {
      const prediction = (predictions.get(i.id) ?? []).find((p) => isBase(p) && p.train_trial_index === 0);
      return { id: i.id, split: i.split ?? null, input: i.input?.text ?? '', references: asArray(i.references), prediction: prediction ?? null, correct: correctness(prediction) };
    });
    return { suite, run, page, size, total: matching.length, pages: Math.max(1, Math.ceil(matching.length / size)), items };
  }

  /**
   * An instance page: every variant of the instance (perturbations), every prediction and the request as sent, and
   * each request state's completion tokens with logprobs (from `scenario_state.json`; `display_requests.json` has
   * only the request).
   */
  instance(suite: string, run: string, id: string): Json {
    const dir = this.runDir(suite, run);
    const variants = this.instanceList(dir).filter((i) => i.id === id);
    if (variants.length === 0) throw notFound(`run ${run} has no instance ${id}`);
    const requests = this.readJson(dir, 'display_requests.json', 'run `flexhelm summarize` on the suite');
    if (!Array.isArray(requests)) throw this.malformed(dir, 'display_requests.json', 'a list of requests');
    const states = this.requestStates(dir).get(id) ?? [];
    return {
      suite,
      run,
      id,
      variants,
      predictions: this.predictionIndex(dir).get(id) ?? [],
      requests: requests.filter((r: Json) => r?.instance_id === id),
      completions: states.map((s: Json) => ({
        train_trial_index: s?.train_trial_index,
        perturbation: s?.instance?.perturbation ?? null,
        reference_index: s?.reference_index ?? null,
        request_mode: s?.request_mode ?? null,
        completions: asArray(s?.result?.completions).map((c: Json) => ({
          text: c.text,
          logprob: c.logprob,
          finish_reason: c.finish_reason ?? null,
          tokens: asArray(c?.tokens).map((t: Json) => ({ text: t?.text, logprob: t?.logprob, top_logprobs: isObject(t?.top_logprobs) ? t.top_logprobs : {} })),
        })),
      })),
    };
  }

  /** Two runs' predictions on the instances they share, a page at a time, and how often each was right. */
  compare(suite: string, a: string, b: string, page: number, size: number, only = 'all'): Json {
    checkPaging(page, size);
    if (a === b) throw new ApiError(400, 'pick two different runs to compare', 'invalid_request_error', 'b');
    const [dirA, dirB] = [this.runDir(suite, a), this.runDir(suite, b)];
    const [predA, predB] = [this.predictionIndex(dirA), this.predictionIndex(dirB)];
    const first = (index: Map<string, DisplayPrediction[]>, id: string) => (index.get(id) ?? []).find((p) => isBase(p) && p.train_trial_index === 0) ?? null;
    const idsB = new Set(this.instanceList(dirB).filter(isBase).map((i) => i.id));
    const shared = this.instanceList(dirA).filter((i) => isBase(i) && idsB.has(i.id));
    const rows = shared.map((i) => {
      const [pa, pb] = [first(predA, i.id), first(predB, i.id)];
      return { id: i.id, input: i.input?.text ?? '', references: asArray(i.references), a: pa, b: pb, correctA: correctness(pa), correctB: correctness(pb) };
    });
    const counts = { both: 0, onlyA: 0, onlyB: 0, neither: 0, unknown: 0 };
    const kind = (r: (typeof rows)[number]) =>
      r.correctA === null || r.correctB === null ? 'unknown' : r.correctA && r.correctB ? 'both' : r.correctA ? 'onlyA' : r.correctB ? 'onlyB' : 'neither';
    for (const r of rows) counts[kind(r)]++;
    if (only !== 'all' && !(only in counts)) throw new ApiError(400, `only must be all, both, onlyA, onlyB, neither or unknown, not ${only}`, 'invalid_request_error', 'only');
    const chosen = only === 'all' ? rows : rows.filter((r) => kind(r) === only);
    const items = chosen.slice((page - 1) * size, page * size);
    return { suite, a, b, page, size, total: chosen.length, shared: rows.length, pages: Math.max(1, Math.ceil(chosen.length / size)), counts, items };
  }

  /**
   * The calibration curve behind HELM's `ece_10_bin` of `split`: the unperturbed predictions' `max_prob` against
   * `exact_match`, in 10 equal-mass bins (edges as HELM's `get_equal_bins`), each bin's mean confidence and accuracy.
   */
  calibration(suite: string, run: string, split = 'test'): Json {
    const dir = this.runDir(suite, run);
    const perInstance = this.readJson(dir, 'per_instance_stats.json', 'the run is unfinished');
    if (!Array.isArray(perInstance)) throw this.malformed(dir, 'per_instance_stats.json', 'a list');
    const pairs: [number, number][] = [];
    for (const entry of perInstance) {
      if (!isObject(entry) || !isBase(entry) || !Array.isArray(entry.stats)) continue;
      const mean = (name: string) => {
        const s = entry.stats.find((x: Json) => x?.name?.name === name && x.name.split === split && isBase(x.name));
        return s && s.count > 0 ? Number(s.sum) / Number(s.count) : undefined;
      };
      const [p, c] = [mean('max_prob'), mean('exact_match')];
      if (p !== undefined && c !== undefined && Number.isFinite(p) && Number.isFinite(c)) pairs.push([p, c]);
    }
    if (pairs.length === 0) return { suite, run, split, bins: [], ece: null };
    pairs.sort((x, y) => x[0] - y[0]);
    const edges = equalMassBins(pairs.map((p) => p[0]), 10);
    const bins = edges.map((upper) => ({ upper, count: 0, confidence: 0, accuracy: 0 }));
    for (const [p, c] of pairs) {
      const i = edges.findIndex((e) => p <= e); // numpy.searchsorted(edges, p, side='left')
      const bin = bins[i < 0 ? bins.length - 1 : i]!;
      bin.count++;
      bin.confidence += p;
      bin.accuracy += c;
    }
    const filled = bins.filter((b) => b.count > 0).map((b) => ({ upper: b.upper, count: b.count, confidence: b.confidence / b.count, accuracy: b.accuracy / b.count }));
    const ece = filled.reduce((sum, b) => sum + (b.count / pairs.length) * Math.abs(b.confidence - b.accuracy), 0);
    return { suite, run, split, bins: filled, ece };
  }

  // --- files -------------------------------------------------------------------------------------------------

  private suiteDir(suite: string): string {
    const name = this.fileName(suite, 'suite');
    if (this.options.suite && name !== this.options.suite) throw notFound(`no suite ${suite}: this server shows suite ${this.options.suite} only`);
    return this.child(join(this.root, 'runs'), name, `suite (no folder runs/${name} in the output folder)`);
  }

  private runDir(suite: string, run: string): string {
    return this.child(this.suiteDir(suite), this.fileName(run, 'run'), `run (suite ${suite} has no run ${run})`);
  }

  /** A single path component from a URL: no separators, no `.`/`..`, no NUL. */
  private fileName(name: string, what: string): string {
    if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name) || name.length > 255) {
      throw notFound(`not a valid ${what} name: ${JSON.stringify(name.slice(0, 80))}`);
    }
    return name;
  }

  /** `parent/name`, existing, and (after symlinks) still inside the output folder. */
  private child(parent: string, name: string, what: string): string {
    const path = join(parent, name);
    let real: string;
    try {
      real = realpathSync(path);
    } catch {
      throw notFound(`no ${what}`);
    }
    const root = realpathSync(this.root);
    if (real !== root && !real.startsWith(root + sep)) throw notFound(`no ${what}: it points outside the output folder`);
    return path;
  }

  private readOptional(dir: string, name: string): Json {
    return existsSync(join(dir, name)) ? this.readJson(dir, name, '') : undefined;
  }

  /** Parsed JSON, kept while the file's size and mtime stay the same (a re-run summarize is picked up). */
  private readJson(dir: string, name: string, hint: string): Json {
    const path = this.child(dir, name, `file ${this.shown(join(dir, name))}${hint ? `: ${hint}` : ''}`);
    return this.cached(path, 'json', () => {
      const text = this.readText(path);
      try {
        return JSON.parse(text);
      } catch (err) {
        throw new ApiError(422, `${this.shown(path)} is not valid JSON (${(err as Error).message}); it may be half-written or damaged: run flexhelm summarize (or the run) again`, 'invalid_request_error', null, 'broken_file');
      }
    });
  }

  private readText(path: string): string {
    const fd = openSync(path, 'r');
    try {
      const stat = fstatSync(fd);
      if (!stat.isFile()) throw notFound(`${this.shown(path)} is not a file`);
      if (stat.size > this.maxFileBytes) {
        throw new ApiError(422, `${this.shown(path)} is ${stat.size} bytes, over this server's limit of ${this.maxFileBytes}`, 'invalid_request_error', null, 'file_too_large');
      }
      const buffer = Buffer.alloc(stat.size);
      let read = 0;
      while (read < stat.size) {
        const n = readSync(fd, buffer, read, stat.size - read, read);
        if (n === 0) break;
        read += n;
      }
      return buffer.subarray(0, read).toString('utf8');
    } finally {
      closeSync(fd);
    }
  }

  /** A value derived from one file (parsed JSON, an index over it), recomputed when the file changes. */
  private cached<T>(path: string, kind: string, make: () => T): T {
    const stat = statSync(path);
    const key = `${stat.size}:${stat.mtimeMs}:${stat.ino}`;
    const slot = `${kind}\u0000${path}`;
    const hit = this.cache.get(slot);
    if (hit && hit.key === key) {
      this.cache.delete(slot); // most recently used goes last
      this.cache.set(slot, hit);
      return hit.value as T;
    }
    const value = make();
    this.cache.set(slot, { key, value });
    while (this.cache.size > 48) this.cache.delete(this.cache.keys().next().value!);
    return value;
  }

  private shown(path: string): string {
    return path.startsWith(this.root + sep) ? path.slice(this.root.length + 1) : path;
  }

  private malformed(dir: string, name: string, expected: string): ApiError {
    return new ApiError(422, `${this.shown(join(dir, name))} is not ${expected} as HELM writes it: run flexhelm summarize again`, 'invalid_request_error', null, 'broken_file');
  }

  private instanceList(dir: string): Instance[] {
    const list = this.readJson(dir, 'instances.json', 'run `flexhelm summarize` on the suite');
    if (!Array.isArray(list) || list.some((i) => typeof i?.id !== 'string')) throw this.malformed(dir, 'instances.json', 'a list of instances with ids');
    return list;
  }

  private predictionIndex(dir: string): Map<string, DisplayPrediction[]> {
    const list = this.readJson(dir, 'display_predictions.json', 'run `flexhelm summarize` on the suite');
    if (!Array.isArray(list) || list.some((p) => typeof p?.instance_id !== 'string')) throw this.malformed(dir, 'display_predictions.json', 'a list of predictions');
    return this.cached(join(dir, 'display_predictions.json'), 'index', () => groupBy(list as DisplayPrediction[], (p) => p.instance_id));
  }

  /** Request states by instance id; none when the run folder has no scenario_state.json (only display files). */
  private requestStates(dir: string): Map<string, Json[]> {
    if (!existsSync(join(dir, 'scenario_state.json'))) return new Map();
    const state = this.readJson(dir, 'scenario_state.json', '');
    if (!Array.isArray(state?.request_states)) throw this.malformed(dir, 'scenario_state.json', 'a scenario state');
    return this.cached(join(dir, 'scenario_state.json'), 'index', () => groupBy(state.request_states as Json[], (s) => String(s?.instance?.id)));
  }

  private comparableRuns(suite: string, runSpec: Json): { name: string; model: string }[] {
    const specs = this.readOptional(this.suiteDir(suite), 'run_specs.json');
    if (!Array.isArray(specs)) return [];
    const same = JSON.stringify(runSpec?.scenario_spec ?? null);
    return specs
      .filter((s: Json) => s?.name !== runSpec?.name && JSON.stringify(s?.scenario_spec ?? null) === same)
      .map((s: Json) => ({ name: String(s.name), model: String(s?.adapter_spec?.model ?? '') }));
  }
}

/** A run as the suite page lists it; `key` is its name without the model, the same for every model's run of it. */
function runEntry(spec: Json): Json {
  const name = String(spec?.name);
  return {
    name,
    key: withoutModel(name),
    model: String(spec?.adapter_spec?.model ?? ''),
    method: String(spec?.adapter_spec?.method ?? ''),
    scenario: String(spec?.scenario_spec?.class_name ?? '').split('.').pop(),
    scenarioArgs: spec?.scenario_spec?.args ?? {},
    groups: Array.isArray(spec?.groups) ? spec.groups.map(String) : [],
  };
}

/** `mmlu:subject=x,method=m,model=org_a` → `mmlu:subject=x,method=m` (HELM writes the model as one `model=` argument). */
function withoutModel(runName: string): string {
  const colon = runName.indexOf(':');
  if (colon < 0) return runName;
  const args = runName.slice(colon + 1).split(',').filter((a) => !a.startsWith('model='));
  return args.length ? `${runName.slice(0, colon)}:${args.join(',')}` : runName.slice(0, colon);
}

const asArray = (x: unknown): Json[] => (Array.isArray(x) ? x : []);
const isObject = (x: unknown): x is Record<string, Json> => typeof x === 'object' && x !== null && !Array.isArray(x);

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

function checkPaging(page: number, size: number): void {
  if (!Number.isInteger(page) || page < 1) throw new ApiError(400, `page must be a whole number from 1, not ${page}`, 'invalid_request_error', 'page');
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) throw new ApiError(400, `size must be a whole number from 1 to ${MAX_PAGE_SIZE}, not ${size}`, 'invalid_request_error', 'size');
}

/** true/false from the prediction's exact-match-family stat; null when it has none. */
function correctness(prediction: DisplayPrediction | null | undefined): boolean | null {
  if (!prediction || typeof prediction.stats !== 'object' || prediction.stats === null) return null;
  for (const name of CORRECTNESS) {
    const v = prediction.stats[name];
    if (typeof v === 'number') return v > 0;
  }
  return null;
}

function searchable(instance: Instance, predictions: DisplayPrediction[] | undefined): string {
  const texts = [instance.input?.text ?? '', ...asArray(instance.references).map((r: Json) => r?.output?.text ?? ''), ...(predictions ?? []).map((p) => p.predicted_text ?? '')];
  return texts.join('\n').toLowerCase();
}
