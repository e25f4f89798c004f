import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
  // Any failed request (a 404 of an API call, a missing script) counts, even where the page shows no console error.
  page.on('response', (r) => r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`));
  page.on('requestfailed', (r) => errors.push(`failed: ${r.url()}`));
  const entry = { page, errors };
  opened.push(entry);
  return entry;
}

/** What the functions passed to the page see (the site's CSP forbids evaluating strings). */
interface BrowserGlobals {
  document: { body: { dataset: Record<string, string | undefined> } };
  location: { hash: string };
  getComputedStyle(element: unknown): { display: string; getPropertyValue(property: string): string };
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

/** The accuracy chart's labels sit inside the axes, clear of the tick numbers, the axis titles and each other. */
async function chartIsReadable(page: Page): Promise<void> {
  const boxes = await page.locator('#accuracy-chart svg').evaluate((chart) => {
    const box = (e: { getBoundingClientRect(): { left: number; top: number; right: number; bottom: number } }) => {
      const r = e.getBoundingClientRect();
      return { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
    };
    const [left, top, right, bottom] = (chart.getAttribute('data-plot') ?? '').split(' ').map(Number);
    const origin = chart.getBoundingClientRect();
    return {
      labels: [...chart.querySelectorAll('text.point-label')].map(box),
      axisText: [...chart.querySelectorAll('text.tick, text.label')].map(box),
      plot: { left: origin.left + left!, top: origin.top + top!, right: origin.left + right!, bottom: origin.top + bottom! },
    };
  });
  type Box = (typeof boxes.labels)[number];
  const overlaps = (a: Box, b: Box) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  expect(boxes.labels.length).toBeGreaterThan(0);
  // Two axis titles and at least three round ticks an axis (how many depends on the data's range).
  expect(boxes.axisText.length).toBeGreaterThanOrEqual(8);
  for (const [i, label] of boxes.labels.entries()) {
    for (const text of boxes.axisText) expect(overlaps(label, text), JSON.stringify({ label, text })).toBe(false);
    for (const other of boxes.labels.slice(i + 1)) expect(overlaps(label, other)).toBe(false);
    expect(label.left).toBeGreaterThanOrEqual(boxes.plot.left);
    expect(label.right).toBeLessThanOrEqual(boxes.plot.right + 0.5);
    expect(label.bottom).toBeLessThanOrEqual(boxes.plot.bottom);
    expect(label.top).toBeGreaterThanOrEqual(boxes.plot.top - 0.5);
  }
  // Tick numbers do not run into each other or into the axis titles either.
  for (const [i, a] of boxes.axisText.entries()) for (const b of boxes.axisText.slice(i + 1)) expect(overlaps(a, b), JSON.stringify({ a, b })).toBe(false);
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
    await chartIsReadable(page);
    // The group's description is HELM's Markdown, rendered: its citation is a link, no bracket syntax is left.
    const description = page.locator('div.description.markdown');
    expect(await description.locator('a').getAttribute('href')).toBe('https://proceedings.mlr.press/v139/wu21c.html');
    expect(await description.locator('a').textContent()).toBe('(Wu et al., 2021)');
    expect(await description.textContent()).not.toContain('](');
    await screenshot(page, 'leaderboard');

    // HELM's metric groups: the targeted-evaluations page has one table per group.
    await show(page, `s/${SUITE}/g/targeted_evaluations`, 'group');
    const titles = await page.locator('section.leaderboard h2').allTextContents();
    for (const t of ['Accuracy', 'Calibration', 'Robustness', 'Fairness', 'Bias', 'Toxicity', 'Efficiency']) expect(titles).toContain(t);
    await screenshot(page, 'metric-groups');
    expect(errors).toEqual([]);
  });

  it("a parent group's leaderboard hides its empty columns (a toggle shows them), keeps headers on one line and the model column in view", async () => {
    const { page, errors } = await openPage();
    await show(page, `s/${SUITE}/g/targeted_evaluations`, 'group');
    const tables = JSON.parse(readFileSync(join(out, 'runs', SUITE, 'groups', 'targeted_evaluations.json'), 'utf8')) as { title: string; header: unknown[]; rows: { value?: unknown }[][] }[];
    const index = tables.findIndex((t) => t.title === 'Accuracy');
    const accuracy = tables[index]!;
    const filled = accuracy.header.filter((_, i) => i === 0 || accuracy.rows.some((r) => r[i]?.value !== undefined && r[i]?.value !== null)).length;
    // A parent group has a column per subgroup and metric; this suite fills a few of them.
    expect(accuracy.header.length).toBeGreaterThan(filled + 5);
    const section = page.locator(`#table-${index}`);
    const headers = section.locator('table.board thead th');
    const visible = () => headers.evaluateAll((ths) => ths.filter((th) => (globalThis as unknown as BrowserGlobals).getComputedStyle(th).display !== 'none').length);
    expect(await visible()).toBe(filled);
    expect(await headers.count()).toBe(accuracy.header.length);
    const toggle = section.locator('.empty-toggle');
    expect(await toggle.textContent()).toContain(`show ${accuracy.header.length - filled} empty columns`);
    await section.evaluate((e) => e.scrollIntoView());
    await screenshot(page, 'parent-leaderboard');
    // A table none of whose columns has a value says so instead of showing the model names alone.
    const calibration = page.locator(`#table-${tables.findIndex((t) => t.title === 'Calibration')}`);
    expect(await calibration.locator('p.muted').textContent()).toBe('No run of this suite has any of these metrics.');
    expect(await calibration.locator('table.board').isVisible()).toBe(false);
    await calibration.locator('input.show-empty').check();
    expect(await calibration.locator('table.board').isVisible()).toBe(true);

    // Headers never wrap (so never inside a word), cells are one line tall, and the model column is sticky.
    const style = (selector: string, property: string) => section.locator(selector).first().evaluate((e, p) => (globalThis as unknown as BrowserGlobals).getComputedStyle(e).getPropertyValue(p), property);
    expect(await style('thead th[data-col="1"]', 'white-space')).toBe('nowrap');
    expect(await style('tbody th', 'position')).toBe('sticky');
    expect(await style('thead th[data-col="0"]', 'position')).toBe('sticky');
    expect(await style('.scroll', 'overflow-x')).toBe('auto');
    await section.locator('input.show-empty').check();
    expect(await visible()).toBe(accuracy.header.length);
    const heights = await headers.evaluateAll((ths) => ths.map((th) => th.getBoundingClientRect().height));
    expect(Math.max(...heights) - Math.min(...heights)).toBeLessThan(1);
    expect(Math.max(...heights)).toBeLessThan(40);

    // With every column shown the table is wider than the page: it scrolls, and the model column stays put.
    const scroller = section.locator('.scroll');
    const [scrollWidth, clientWidth] = await scroller.evaluate((e) => [e.scrollWidth, e.clientWidth]);
    expect(scrollWidth).toBeGreaterThan(clientWidth);
    const modelLeft = () => section.locator('tbody th').first().evaluate((e) => Math.round(e.getBoundingClientRect().left));
    const before = await modelLeft();
    await scroller.evaluate((e) => e.scrollTo({ left: e.scrollWidth }));
    await page.waitForFunction((el) => el.scrollLeft > 0, await scroller.elementHandle());
    expect(await modelLeft()).toBe(before);
    expect(await section.locator('tbody th').first().isVisible()).toBe(true);
    await section.locator('input.show-empty').uncheck();
    expect(await visible()).toBe(filled);
    expect(errors).toEqual([]);
  });

  it('the suite page shows the two models side by side, one row per run description', async () => {
    const { page, errors } = await openPage();
    await show(page, `s/${SUITE}`, 'suite');
    expect(await page.locator('#runs thead th.model').allTextContents()).toEqual([...MODELS]);
    const rows = page.locator('#runs tbody tr');
    expect(await rows.count()).toBe(runs[MODELS[0]]!.length);
    // Each row holds every model's run of one description, in the model columns' order.
    expect(await rows.locator('th').allTextContents()).toEqual([...runs[MODELS[0]]!].sort().map((r) => r.replace(/[:,]model=[^,]*/, '')));
    const first = rows.filter({ hasText: 'pattern_match' });
    const links = await first.locator('td.run-cell a').evaluateAll((as) => as.map((a) => decodeURIComponent(a.getAttribute('href') ?? '')));
    expect(links).toEqual(MODELS.map((m) => `#/s/${SUITE}/r/${patternMatch(m)}`));
    await first.locator(`a:has-text("${MODELS[0]} vs ${MODELS[1]}")`).click();
    await rendered(page);
    expect(await page.locator('body').getAttribute('data-page')).toBe('compare');
    await show(page, `s/${SUITE}`, 'suite');
    await screenshot(page, 'suite');
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

  it("renders a group description's Markdown but drops scripts, handlers and javascript: links", async () => {
    const suite = 'evil-markdown';
    cpSync(join(out, 'runs', SUITE), join(out, 'runs', suite), { recursive: true });
    const metadataFile = join(out, 'runs', suite, 'groups_metadata.json');
    const metadata = JSON.parse(readFileSync(metadataFile, 'utf8'));
    metadata.synthetic_reasoning.description = [
      '**Bold** and a [paper](https://example.org/paper).',
      '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">',
      '[click me](javascript:window.__xss=3) <a href="javascript:window.__xss=4" onclick="window.__xss=5">also</a>',
      '<iframe src="data:text/html,<script>parent.__xss=6</script>"></iframe><p style="color:red" onmouseover="window.__xss=7">styled</p>',
    ].join('\n\n');
    writeFileSync(metadataFile, JSON.stringify(metadata));
    const { page, errors } = await openPage();
    await show(page, `s/${suite}/g/synthetic_reasoning`, 'group');
    const description = page.locator('div.description.markdown');
    expect(await description.locator('strong').textContent()).toBe('Bold');
    expect(await description.locator('a', { hasText: 'paper' }).getAttribute('href')).toBe('https://example.org/paper');
    expect(await description.locator('script, img, iframe, [style], [onclick], [onerror], [onmouseover]').count()).toBe(0);
    const hrefs = await description.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    expect(hrefs.filter((h) => h !== null && !/^https:/.test(h))).toEqual([]);
    // Raw HTML in the Markdown is shown as text.
    expect(await description.textContent()).toContain('<img src=x onerror="window.__xss = 2">');
    expect(await description.textContent()).toContain('styled');
    for (const a of await description.locator('a').all()) await a.hover();
    await description.hover();
    expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
    // Nothing was even blocked by the page's CSP: the hostile markup never reached the page as markup.
    expect(errors).toEqual([]);
  });

  it('a suite not summarized yet lists its runs and names the command that summarizes it, without a failed request', async () => {
    const suite = 'fresh';
    for (const model of MODELS) for (const run of runs[model]!) cpSync(runDir(run), join(out, 'runs', suite, run), { recursive: true });
    rmSync(join(out, 'runs', suite, runs[MODELS[1]]![2]!, 'stats.json'));
    const { page, errors } = await openPage();
    await show(page, `s/${suite}`, 'suite');
    expect(await page.locator('#not-summarized pre.command').textContent()).toBe(`flexhelm summarize --suite ${suite}`);
    expect(await page.locator('#not-summarized').textContent()).toContain('6 run folders (5 finished)');
    expect(await page.locator('#runs thead th.model').allTextContents()).toEqual([...MODELS]);
    expect(await page.locator('#runs tbody tr').count()).toBe(3);
    expect(await page.locator('#runs td.unfinished').count()).toBe(1);
    expect(await page.locator('#runs a').count()).toBe(0);
    expect(await page.locator('#error').isHidden()).toBe(true);
    await screenshot(page, 'not-summarized');
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
    expect(await page.locator('#runs tbody tr').count()).toBe(3);
    expect(await page.locator('#runs td.run-cell a').count()).toBe(6);
  });
});

afterAll(async () => {
  for (const { page } of opened) await page.close().catch(() => {});
});
