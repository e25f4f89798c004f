import { existsSync, readFileSync, statSync } from 'node:fs';
import { JobStore } from './job-store.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobRecord } from './job-record.js';
import type { RunningServer } from './start-server.js';
import { get, loadTinyModel, post, serve, type TinyModel } from './test-server.js';

const CHROMIUM = process.env.FLEXHELM_CHROMIUM ?? '/usr/bin/chromium';

// Finished jobs write their suite's summaries, which need HELM's schema.yaml (CI exports this; the same path locally).
process.env.FLEXHELM_HELM_SOURCE_DIR ??= fileURLToPath(new URL('../../../../shared/helm-v0.2.1', import.meta.url));

let model: TinyModel;
let server: RunningServer;
let browser: Browser;
let job: JobRecord;

beforeAll(async () => {
  // Never skipped: CI installs Chromium through .ci/system-deps, so a missing one is a setup error to report.
  if (!existsSync(CHROMIUM)) {
    throw new Error(`the viewer test needs Debian's Chromium at ${CHROMIUM}: run "apt-get install -y chromium" (CI does it in .ci/system-deps) or set FLEXHELM_CHROMIUM`);
  }
  model = await loadTinyModel();
  server = await serve(model, { outputPath: join(model.root, 'out'), apiKey: 'viewer-key-1234' });
  const auth = { authorization: 'Bearer viewer-key-1234' };
  const created = await post(`${server.url}/v1/runs`, { descriptions: ['synthetic_reasoning:mode=pattern_match'], max_eval_instances: 6, num_train_trials: 1 }, auth);
  for (;;) {
    job = (await get(`${server.url}/v1/runs/${created.json.id}`, auth)).json as JobRecord;
    if (job.status !== 'queued' && job.status !== 'running') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(job.status).toBe('succeeded');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await model?.engine.close();
});

describe('results viewer in Chromium', () => {
  it('shows the jobs, metrics, chart and predictions, and its filters work', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/#key=viewer-key-1234`);
    await page.waitForSelector('body[data-loaded="true"]');
    await page.waitForSelector('#predictions tbody tr');

    expect(await page.locator('#jobs tbody tr').count()).toBe(1);
    expect(await page.locator('#jobs tbody tr td').nth(1).textContent()).toBe('succeeded');
    expect(await page.locator('#model').textContent()).toBe('local/tiny-opt');
    const metricNames = await page.locator('#metrics tbody tr td:nth-child(2)').allTextContents();
    expect(metricNames).toContain('exact_match');
    expect(await page.locator('#chart svg polyline.done').count()).toBe(1);

    const predictions = (await get(`${server.url}/v1/runs/${job.id}/predictions?run=0`, { authorization: 'Bearer viewer-key-1234' })).json.data as {
      prompt: string;
      completion: string;
      references: { text: string }[];
      correct: boolean | null;
    }[];
    const rows = page.locator('#predictions tbody tr');
    expect(await rows.count()).toBe(predictions.length);
    expect(await page.locator('#prediction-count').textContent()).toBe(`${predictions.length} of ${predictions.length} requests`);
    expect(await rows.first().locator('td').nth(2).textContent()).toBe(predictions[0]!.prompt);

    // text filter: nonsense keeps no row, a piece of the first completion keeps the rows that contain it
    await page.fill('#filter-text', 'zzz-no-such-text-zzz');
    expect(await rows.count()).toBe(0);
    const needle = predictions[0]!.completion.trim().slice(0, 12);
    await page.fill('#filter-text', needle);
    const matching = predictions.filter((p) => [p.prompt, p.completion, ...p.references.map((r) => r.text)].some((t) => t.toLowerCase().includes(needle.toLowerCase())));
    expect(await rows.count()).toBe(matching.length);
    await page.fill('#filter-text', '');
    expect(await rows.count()).toBe(predictions.length);
    await page.selectOption('#filter-correct', 'incorrect');
    expect(await rows.count()).toBe(predictions.filter((p) => p.correct === false).length);
    await page.selectOption('#filter-correct', 'all');

    // nothing sticks out sideways
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBe(1280);
    const shot = join(model.root, 'viewer.png');
    await page.screenshot({ path: shot, fullPage: true });
    const png = readFileSync(shot);
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(png.readUInt32BE(16)).toBe(1280); // IHDR width
    expect(statSync(shot).size).toBeGreaterThan(20_000);
    console.log(`viewer screenshot: ${shot}`);
    expect(errors).toEqual([]);
  });

  it('serves the results site beside the viewer, its data behind the API key', async () => {
    const auth = { authorization: 'Bearer viewer-key-1234' };
    expect((await get(`${server.url}/v1/results/suites`)).status).toBe(401);
    expect((await get(`${server.url}/v1/results/suites`, auth)).json.data).toEqual(['v1']);
    // The finished job wrote its suite's summaries, so the results site has its run page at once.
    const run = encodeURIComponent(job.runs[0]!.name);
    const page = await get(`${server.url}/v1/results/suites/v1/runs/${run}`, auth);
    expect(page.status).toBe(200);
    expect(JSON.stringify(page.json)).toContain('synthetic_reasoning');
    const html = await fetch(`${server.url}/results/`);
    expect(html.status).toBe(200);
    expect(await html.text()).toContain('/results/results.js');
  });

  it('asks for the API key when the page has none', async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/`);
    await page.evaluate('localStorage.clear()');
    await page.reload();
    await page.waitForSelector('#error:not([hidden])');
    expect(await page.locator('#error').textContent()).toMatch(/Missing API key/);
  });
});

describe('progress chart of a resumed job', () => {
  it('draws no negative bar where a record’s token count dips at a restart', async () => {
    // A record as servers before the resume fix saved it: generatedTokens fell back to 0 when the job resumed.
    const out = join(model.root, 'out-dip');
    const samples = [
      { t: 0, done: 0, generatedTokens: 0 },
      { t: 1, done: 4, generatedTokens: 40 },
      { t: 2, done: 8, generatedTokens: 80 },
      { t: 30, done: 8, generatedTokens: 0 },
      { t: 31, done: 12, generatedTokens: 40 },
    ];
    new JobStore(join(out, 'server', 'jobs')).saveNow({
      id: 'run-dip-1',
      status: 'succeeded',
      request: { descriptions: ['synthetic_reasoning:mode=pattern_match'], suite: 'v1' },
      createdAt: new Date().toISOString(),
      resumed: 1,
      runs: [{ name: 'synthetic_reasoning:mode=pattern_match,model=local_tiny-opt', status: 'done' }],
      progress: { runIndex: 0, runCount: 1, done: 12, total: 12, cachedHits: 8, generatedTokens: 40 },
      samples,
    });
    const dip = await serve(model, { outputPath: out });
    try {
      const page = await browser.newPage();
      await page.goto(`${dip.url}/`);
      await page.waitForSelector('#chart svg rect.rate');
      const heights = (await page.locator('#chart svg rect.rate').evaluateAll((rects) => rects.map((r) => Number(r.getAttribute('height'))))) as number[];
      expect(heights).toHaveLength(samples.length - 1);
      for (const h of heights) expect(h).toBeGreaterThanOrEqual(0);
      expect(heights[2]).toBe(0); // the dip
      expect(heights[1]).toBeGreaterThan(0);
    } finally {
      await dip.close();
    }
  });
});
