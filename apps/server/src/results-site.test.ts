import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { loadHelmSchema, summarizeSuite } from '@flexhelm/summarize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startResultsServer, type RunningResultsServer } from './start-results-server.js';
import { MODELS, runSuite, SUITE } from './test-results-suite.js';

const CHROMIUM = process.env.FLEXHELM_CHROMIUM ?? '/usr/bin/chromium';
const HELM_SOURCE = fileURLToPath(new URL('../../../../shared/helm-v0.2.1', import.meta.url));
// The README's screenshots are rewritten only on request (FLEXHELM_UPDATE_SCREENSHOTS=1): a plain test run must not
// change tracked files, so it writes them to a temporary folder and checks them there.
const SCREENSHOTS = process.env.FLEXHELM_UPDATE_SCREENSHOTS === '1' ? fileURLToPath(new URL('../docs/screenshots/', import.meta.url)) : mkdtempSync(join(tmpdir(), 'flexhelm-screenshots-'));
/** max_eval_instances, over the valid and test splits together: three pages of 10 on a run page. */
const INSTANCES = 24;

let root: string;
let out: string;
let runs: Record<string, string[]>;
let server: RunningResultsServer;
let browser: Browser;
const opened: { page: Page; errors: string[] }[] = [];

beforeAll(async () => {
  // Never skipped: CI installs Chromium through .ci/system-deps, so a missing one is a setup error to report.
  if (!existsSync(CHROMIUM)) {
    throw new Error(`the results site test needs Debian's Chromium at ${CHROMIUM}: run "apt-get install -y chromium" (CI does it in .ci/system-deps) or set FLEXHELM_CHROMIUM`);
  }
  root = mkdtempSync(join(tmpdir(), 'flexhelm-results-'));
  out = join(root, 'out');
  runs = await runSuite(root, out, INSTANCES);
  const schema = await loadHelmSchema({ helmSourceDir: HELM_SOURCE, offline: true });
  summarizeSuite({ outputPath: out, suite: SUITE, schema, date: '2026-12-01' });
  server = await startResultsServer({ outputPath: out });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

const runDir = (run: string) => join(out, 'runs', SUITE, run);
const readRun = (run: string, file: string) => JSON.parse(readFileSync(join(runDir(run), file), 'utf8'));
const patternMatch = (model: string) => runs[model]!.find((r) => r.startsWith('synthetic_reasoning:mode=pattern_match'))!;
const url = (hash: string) => `${server.url}/results/#/${hash}`;
const part = encodeURIComponent;

/** A page that records script errors and console errors. */
async function openPage(): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1200, height: 820 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && errors.push(`console: ${m.text()}`));
  const entry = { page, errors };
  opened.push(entry);
  return entry;
}

/** What the functions passed to the page see (the site's CSP forbids evaluating strings). */
interface BrowserGlobals {
  document: { body: { dataset: Record<string, string | undefined> } };
  location: { hash: string };
}

/** Waits until the page has rendered what the current hash asks for. */
async function rendered(page: Page): Promise<void> {
  await page.waitForFunction(() => {
    const { document, location } = (globalThis as unknown as BrowserGlobals);
    return document.body.dataset.loaded === 'true' && document.body.dataset.route === location.hash;
  });
}

async function hashHas(page: Page, text: string): Promise<void> {
  await page.waitForFunction((t) => (globalThis as unknown as BrowserGlobals).location.hash.includes(t), text);
}

async function show(page: Page, hash: string, kind: string): Promise<void> {
  await page.goto(url(hash));
  await rendered(page);
  expect(await page.locator('#error').textContent()).toBe('');
  expect(await page.locator('body').getAttribute('data-page')).toBe(kind);
}

/** A small viewport screenshot for the README; checked to be a real PNG of the viewport's width. */
async function screenshot(page: Page, name: string): Promise<void> {
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path });
  const png = readFileSync(path);
  expect(png.subarray(1, 4).toString()).toBe('PNG');
  expect(png.readUInt32BE(16)).toBe(1200);
  expect(statSync(path).size).toBeGreaterThan(10_000);
  expect(statSync(path).size).toBeLessThan(400_000);
}

describe('results site in Chromium on two models × three scenarios', () => {
  it('the leaderboard shows both models, sorts by a column and says which cells were not computed', async () => {
    const { page, errors } = await openPage();
    await show(page, `s/${SUITE}/g/synthetic_reasoning`, 'group');
    const tables = JSON.parse(readFileSync(join(out, 'runs', SUITE, 'groups', 'synthetic_reasoning.json'), 'utf8'));
    const board = page.locator('#table-1 table.board');
    expect(await page.locator('section.leaderboard h2').allTextContents()).toEqual(tables.map((t: { title: string }) => t.title));
    expect(await board.locator('tbody th').allTextContents()).toEqual([...MODELS]);
    // synthetic_reasoning_natural has no exact match: HELM leaves its EM cell empty, the page says so.
    expect(await page.locator('td.nc').count()).toBeGreaterThan(0);
    expect(await page.locator('td.nc').first().textContent()).toBe('not computed');

    // Sort by observed runtime (column 2 of the scenario table): descending on the first click, then ascending.
    const column = tables[1].header.findIndex((h: { value: string }) => /inference time/i.test(h.value));
    expect(column).toBeGreaterThan(0);
    const byRuntime = tables[1].rows.map((r: { value: number }[]) => ({ model: r[0]!.value, runtime: r[column]!.value }));
    const header = board.locator(`thead th[data-col="${column}"]`);
    await header.click();
    expect(await header.getAttribute('aria-sort')).toBe('descending');
    expect(await board.locator('tbody th').allTextContents()).toEqual([...byRuntime].sort((a, b) => b.runtime - a.runtime).map((r) => r.model));
    await header.click();
    expect(await header.getAttribute('aria-sort')).toBe('ascending');
    expect(await board.locator('tbody th').allTextContents()).toEqual([...byRuntime].sort((a, b) => a.runtime - b.runtime).map((r) => r.model));
    const shown = await board.locator(`tbody td:nth-child(${column + 1})`).allTextContents();
    expect(shown.map(Number)).toEqual([...byRuntime].sort((a, b) => a.runtime - b.runtime).map((r) => Number(r.runtime.toFixed(3))));
    expect(await page.locator('#accuracy-chart circle.point').count()).toBe(2);
    expect(await page.locator('#accuracy-chart text.point-label').allTextContents()).toEqual([...MODELS]);
    await screenshot(page, 'leaderboard');

    // HELM's metric groups: the targeted-evaluations page has one table per group.
    await show(page, `s/${SUITE}/g/targeted_evaluations`, 'group');
    const titles = await page.locator('section.leaderboard h2').allTextContents();
    for (const t of ['Accuracy', 'Calibration', 'Robustness', 'Fairness', 'Bias', 'Toxicity', 'Efficiency']) expect(titles).toContain(t);
    await screenshot(page, 'metric-groups');
    expect(errors).toEqual([]);
  });

  it('a run page shows the specs, the metrics per split, the calibration curve, and pages through its instances', async () => {
    const { page, errors } = await openPage();
    const run = patternMatch(MODELS[0]);
    await show(page, `s/${SUITE}/r/${part(run)}?size=10`, 'run');
    const spec = readRun(run, 'run_spec.json');
    const scenario = readRun(run, 'scenario.json');
    expect(await page.locator('p.description').first().textContent()).toBe(scenario.description);
    expect(await page.locator('#adapter-spec tr', { hasText: /^model/ }).locator('td').textContent()).toBe(spec.adapter_spec.model);
    expect(await page.locator('#adapter-spec th').allTextContents()).toEqual(Object.keys(spec.adapter_spec));
    const splits = await page.locator('#metrics summary').allTextContents();
    expect(splits.some((s) => s.startsWith('test · no perturbation'))).toBe(true);
    expect(splits.some((s) => s.startsWith('valid · no perturbation'))).toBe(true);

    // The calibration bins reproduce HELM's ece_10_bin for the test split.
    const calibration = (await (await fetch(`${server.url}/v1/results/suites/${SUITE}/runs/${part(run)}/calibration`)).json()) as { ece: number; bins: { count: number }[] };
    const ece = readRun(run, 'stats.json').find((s: { name: { name: string; split?: string; perturbation?: unknown } }) => s.name.name === 'ece_10_bin' && s.name.split === 'test' && !s.name.perturbation);
    expect(calibration.ece).toBeCloseTo(ece.mean, 12);
    expect(calibration.ece / ece.mean).toBeCloseTo(1, 9);
    const instances = readRun(run, 'instances.json') as { id: string; split: string }[];
    expect(calibration.bins.reduce((n, b) => n + b.count, 0)).toBe(instances.filter((i) => i.split === 'test').length);
    expect(await page.locator('#calibration-chart circle.point').count()).toBe(calibration.bins.length);

    // Server-side pages: 24 instances, 10 a page.
    const ids = instances.map((i) => i.id);
    expect(ids).toHaveLength(INSTANCES);
    const pageOf = page.locator('.page-of').first();
    expect(await pageOf.textContent()).toBe(`page 1 of 3 · ${ids.length} instances`);
    expect(await page.locator('#instances tbody tr td:first-child').allTextContents()).toEqual(ids.slice(0, 10));
    await screenshot(page, 'run');
    await page.locator('#calibration-chart').evaluate((e) => e.scrollIntoView());
    await screenshot(page, 'run-metrics');
    await page.locator('.pager .next').first().click();
    await hashHas(page, 'page=2');
    await rendered(page);
    expect(await pageOf.textContent()).toBe(`page 2 of 3 · ${ids.length} instances`);
    expect(await page.locator('#instances tbody tr td:first-child').allTextContents()).toEqual(ids.slice(10, 20));
    await page.locator('.pager .next').first().click();
    await hashHas(page, 'page=3');
    await rendered(page);
    expect(await pageOf.textContent()).toBe(`page 3 of 3 · ${ids.length} instances`);
    expect(await page.locator('#instances tbody tr td:first-child').allTextContents()).toEqual(ids.slice(20));
    expect(await page.locator('.pager .next').first().isDisabled()).toBe(true);
    expect(errors).toEqual([]);
  });

  it('an instance page shows the prompt as sent, the references with the correct one marked and a logprob strip', async () => {
    const { page, errors } = await openPage();
    const run = patternMatch(MODELS[1]);
    await show(page, `s/${SUITE}/r/${part(run)}`, 'run');
    await page.locator('#instances tbody tr:first-child a').click();
    await rendered(page);
    expect(await page.locator('body').getAttribute('data-page')).toBe('instance');
    const state = readRun(run, 'scenario_state.json').request_states[0];
    const request = readRun(run, 'display_requests.json').find((r: { instance_id: string }) => r.instance_id === state.instance.id);
    expect(await page.locator('h1').textContent()).toBe(`Instance ${state.instance.id}`);
    expect(await page.locator('pre.input').textContent()).toBe(state.instance.input.text);
    expect(await page.locator('pre.prompt').textContent()).toBe(request.request.prompt);
    expect(await page.locator('pre.completion').textContent()).toBe(state.result.completions[0].text);
    const correct = state.instance.references.filter((r: { tags: string[] }) => r.tags.includes('correct')).map((r: { output: { text: string } }) => r.output.text);
    expect(await page.locator('ol.references li.correct > span:first-child').allTextContents()).toEqual(correct);
    const tokens = state.result.completions[0].tokens as { text: string; logprob: number }[];
    const strip = page.locator('.logprobs .token');
    expect(await strip.count()).toBe(tokens.length);
    expect(Number(await strip.first().getAttribute('data-logprob'))).toBe(tokens[0]!.logprob);
    expect(await page.locator('details.request table.kv th').allTextContents()).toContain('temperature');
    await screenshot(page, 'instance');
    expect(errors).toEqual([]);
  });

  it('compares the two models on the same instances, a page at a time', async () => {
    const { page, errors } = await openPage();
    const [a, b] = [patternMatch(MODELS[0]), patternMatch(MODELS[1])];
    await show(page, `s/${SUITE}/r/${part(a)}`, 'run');
    await page.locator('.compare-links a', { hasText: MODELS[1] }).click();
    await rendered(page);
    expect(await page.locator('body').getAttribute('data-page')).toBe('compare');
    expect(await page.locator('h1').textContent()).toBe(`${MODELS[0]} vs ${MODELS[1]}`);
    const predictionsA = readRun(a, 'display_predictions.json');
    const predictionsB = readRun(b, 'display_predictions.json');
    const rows = page.locator('#comparison tbody tr');
    expect(await rows.count()).toBe(INSTANCES);
    const first = await rows.first().locator('td').allTextContents();
    const id = first[0]!;
    const text = (list: { instance_id: string; predicted_text: string }[]) => list.find((p) => p.instance_id === id)!.predicted_text;
    expect(first[3]).toContain(text(predictionsA).slice(0, 40));
    expect(first[4]).toContain(text(predictionsB).slice(0, 40));
    const counts = await page.locator('#agreement td').allTextContents();
    expect(counts.map(Number).reduce((x, y) => x + y, 0)).toBe(INSTANCES);
    await screenshot(page, 'compare');
    // Pages of 10, and the filter on who got it right keeps only such rows.
    await page.locator('.pager .page-size').first().selectOption('10');
    await rendered(page);
    expect(await page.locator('.page-of').first().textContent()).toBe(`page 1 of 3 · ${INSTANCES} instances`);
    expect(await rows.count()).toBe(10);
    await page.locator('#compare-filter').selectOption('neither');
    await hashHas(page, 'only=neither');
    await rendered(page);
    expect(await rows.count()).toBe(Math.min(10, Number(counts[3])));
    expect(errors).toEqual([]);
  });
});

describe('hostile files', () => {
  it('shows model outputs and file contents as text, never as markup, and perturbed variants side by side', async () => {
    // A copy of one run whose instance input and prediction are markup, with a perturbed variant beside it.
    const run = patternMatch(MODELS[0]);
    const evilDir = join(out, 'runs', 'evil', run);
    cpSync(runDir(run), evilDir, { recursive: true });
    cpSync(join(out, 'runs', SUITE, 'run_specs.json'), join(out, 'runs', 'evil', 'run_specs.json'));
    const instances = readRun(run, 'instances.json');
    const predictions = readRun(run, 'display_predictions.json');
    const id = instances[0].id;
    const attack = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';
    instances[0].input.text = `${attack} input`;
    instances.push({ ...instances[0], input: { text: `${attack} perturbed` }, perturbation: { name: 'typos', robustness: true, fairness: false, computed_on: 'perturbed', prob: 0.1 } });
    predictions[0].predicted_text = `${attack} prediction`;
    predictions.push({ ...predictions[0], predicted_text: 'perturbed prediction', perturbation: { name: 'typos', robustness: true, fairness: false, computed_on: 'perturbed', prob: 0.1 } });
    writeFileSync(join(evilDir, 'instances.json'), JSON.stringify(instances));
    writeFileSync(join(evilDir, 'display_predictions.json'), JSON.stringify(predictions));

    const { page, errors } = await openPage();
    await show(page, `s/evil/r/${part(run)}/i/${part(id)}`, 'instance');
    expect(await page.locator('article.variant h2').allTextContents()).toEqual(['original', 'typos']);
    expect(await page.locator('pre.input').allTextContents()).toEqual([`${attack} input`, `${attack} perturbed`]);
    expect(await page.locator('pre.completion').allTextContents()).toEqual([`${attack} prediction`, 'perturbed prediction']);
    await show(page, `s/evil/r/${part(run)}`, 'run');
    expect(await page.locator('#instances tbody tr:first-child td:nth-child(2)').textContent()).toBe(`${attack} input`);
    expect(await page.locator('main img, main script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
    expect(errors).toEqual([]);
  });

  it('answers a garbage or half-written summary with an error page that names the file, and keeps serving', async () => {
    cpSync(join(out, 'runs', SUITE), join(out, 'runs', 'broken'), { recursive: true });
    writeFileSync(join(out, 'runs', 'broken', 'groups', 'synthetic_reasoning.json'), '[{"title": "half-writ');
    writeFileSync(join(out, 'runs', 'broken', 'run_specs.json'), '\u0000\u0001garbage');
    for (const [hash, file] of [['s/broken/g/synthetic_reasoning', 'groups/synthetic_reasoning.json'], ['s/broken', 'run_specs.json']]) {
      const { page } = await openPage();
      await page.goto(url(hash!));
      await rendered(page);
      const message = new RegExp(`^runs/broken/${file!.replace('.', '\\.')} is not valid JSON \\(.+\\); it may be half-written or damaged: run flexhelm summarize`);
      expect(await page.locator('#error').textContent()).toMatch(message);
      expect(await page.locator('#page').textContent()).toBe('');
    }
    const { page } = await openPage();
    // The server is still up and the good suite still shows.
    await show(page, `s/${SUITE}`, 'suite');
    expect(await page.locator('#runs tbody tr').count()).toBe(6);
  });
});

afterAll(async () => {
  for (const { page } of opened) await page.close().catch(() => {});
});
