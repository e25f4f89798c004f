import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startResultsServer, type RunningResultsServer } from './start-results-server.js';

// A hand-made suite in HELM's formats: small enough to write here, enough to exercise every route's checks.
const root = mkdtempSync(join(tmpdir(), 'flexhelm-results-server-'));
const out = join(root, 'out');
const suiteDir = join(out, 'runs', 'v1');
const RUN = 'toy:model=a_b';
const write = (path: string, value: unknown) => {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value));
};

function makeSuite(dir: string): void {
  const runDir = join(dir, RUN);
  const runSpec = { name: RUN, scenario_spec: { class_name: 'x.ToyScenario', args: {} }, adapter_spec: { model: 'a/b', method: 'generation' }, metric_specs: [], groups: ['toy'] };
  write(join(dir, 'run_specs.json'), [runSpec]);
  write(join(dir, 'groups.json'), []);
  write(join(runDir, 'run_spec.json'), runSpec);
  write(join(runDir, 'stats.json'), [{ name: { name: 'exact_match', split: 'test' }, count: 1, sum: 1, sum_squared: 1, min: 1, max: 1, mean: 1 }]);
  const instances = Array.from({ length: 45 }, (_, i) => ({ id: `id${i}`, input: { text: `question ${i}` }, references: [{ output: { text: `${i}` }, tags: ['correct'] }], split: 'test' }));
  write(join(runDir, 'instances.json'), instances);
  write(join(runDir, 'display_predictions.json'), instances.map((i, n) => ({ instance_id: i.id, train_trial_index: 0, predicted_text: `${n % 3 ? n : -1}`, stats: { exact_match: n % 3 ? 1 : 0 } })));
  write(join(runDir, 'display_requests.json'), instances.map((i) => ({ instance_id: i.id, train_trial_index: 0, request: { prompt: `Q: ${i.input.text}` } })));
}

let server: RunningResultsServer;

async function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; json: { error?: { message: string } } & Record<string, unknown> }> {
  const res = await fetch(`${server.url}${path}`, { headers });
  return { status: res.status, json: (await res.json()) as { error?: { message: string } } & Record<string, unknown> };
}

/** A GET with the path sent exactly as written (fetch would normalise `..`). */
function rawGet(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}/`, { path }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  makeSuite(suiteDir);
  // A secret beside the output folder, and a run folder that is a symlink to it.
  write(join(root, 'secret', 'run_spec.json'), { name: 'secret' });
  write(join(root, 'secret', 'stats.json'), []);
  symlinkSync(join(root, 'secret'), join(suiteDir, 'escape'));
  server = await startResultsServer({ outputPath: out });
});

afterAll(async () => {
  await server?.close();
});

describe('serve-results routes', () => {
  it('pages through instances on the server, with the correctness of each prediction', async () => {
    const first = await get(`/v1/results/suites/v1/runs/${encodeURIComponent(RUN)}/instances?page=1&size=20`);
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ total: 45, pages: 3, page: 1, size: 20 });
    const items = first.json.items as { id: string; correct: boolean; prediction: { predicted_text: string } }[];
    expect(items.map((i) => i.id)).toEqual(Array.from({ length: 20 }, (_, i) => `id${i}`));
    expect(items.slice(0, 3).map((i) => i.correct)).toEqual([false, true, true]);
    const last = await get(`/v1/results/suites/v1/runs/${encodeURIComponent(RUN)}/instances?page=3&size=20`);
    expect((last.json.items as unknown[]).length).toBe(5);
    const filtered = await get(`/v1/results/suites/v1/runs/${encodeURIComponent(RUN)}/instances?q=question%2044`);
    expect((filtered.json.items as { id: string }[]).map((i) => i.id)).toEqual(['id44']);
  });

  it('refuses bad paging with a 400 saying what is allowed', async () => {
    const base = `/v1/results/suites/v1/runs/${encodeURIComponent(RUN)}/instances`;
    expect((await get(`${base}?size=5000`)).json.error?.message).toBe('size must be a whole number from 1 to 200, not 5000');
    expect((await get(`${base}?page=0`)).json.error?.message).toBe('page must be a whole number from 1, not 0');
    expect((await get(`${base}?page=-1`)).json.error?.message).toBe('page must be a whole number, not "-1"');
    expect((await get(`${base}?page=1&page=2`)).status).toBe(400);
    expect((await get(`/v1/results/suites/v1/compare?a=${encodeURIComponent(RUN)}&b=${encodeURIComponent(RUN)}`)).json.error?.message).toBe('pick two different runs to compare');
  });

  it('reads nothing outside the output folder: no traversal, no symlink escape', async () => {
    for (const path of ['/v1/results/suites/..%2F..%2Fsecret', '/v1/results/suites/v1/runs/..', '/v1/results/suites/v1/runs/%2E%2E', '/v1/results/suites/v1/groups/..%2F..%2F..%2Fsecret%2Frun_spec', '/v1/results/suites/v1/runs/..%5C..%5Csecret']) {
      const r = await rawGet(path);
      expect(r.status, path).toBe(404);
      expect(r.body).not.toContain('secret"');
    }
    const outside = await get('/v1/results/suites/v1/runs/escape');
    expect(outside.status).toBe(404);
    expect(outside.json.error?.message).toBe('no run (suite v1 has no run escape): it points outside the output folder');
    const nul = await get('/v1/results/suites/v1%00/runs/x');
    expect(nul.status).toBe(404);
  });

  it('lists the runs of a suite not summarized yet and names the command that summarizes it', async () => {
    mkdirSync(join(out, 'runs', 'unsummarized', 'r'), { recursive: true });
    const runSpec = { name: 'toy:k=1,model=a_b', scenario_spec: { class_name: 'x.ToyScenario', args: {} }, adapter_spec: { model: 'a/b' }, groups: ['toy'] };
    write(join(out, 'runs', 'unsummarized', runSpec.name, 'run_spec.json'), runSpec);
    write(join(out, 'runs', 'unsummarized', runSpec.name, 'stats.json'), []);
    write(join(out, 'runs', 'unsummarized', 'broken', 'run_spec.json'), '{"name": "half');
    const r = await get('/v1/results/suites/unsummarized');
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ suite: 'unsummarized', summarized: false, command: 'flexhelm summarize --suite unsummarized' });
    const runs = r.json.runs as { name: string; key: string; model: string; finished: boolean }[];
    expect(runs.map((x) => [x.name, x.key, x.model, x.finished])).toEqual([
      ['broken', 'broken', '', false],
      ['r', 'r', '', false],
      ['toy:k=1,model=a_b', 'toy:k=1', 'a/b', true],
    ]);
  });

  it("serves the Markdown renderer and sanitizer from node_modules under the site's CSP", async () => {
    for (const [path, global] of [['/results/vendor/marked.js', 'marked'], ['/results/vendor/purify.js', 'DOMPurify']]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(await res.text()).toContain(global);
    }
  });

  it('takes JSON of the wrong shape without an internal error', async () => {
    const dir = join(out, 'runs', 'odd');
    makeSuite(dir);
    write(join(dir, 'groups_metadata.json'), [1, 2]);
    write(join(dir, 'groups.json'), { not: 'a list' });
    write(join(dir, 'costs.json'), '"a string"');
    write(join(dir, 'groups', 'g.json'), [{ title: 't' }]);
    const runDir = join(dir, RUN);
    write(join(runDir, 'instances.json'), [{ id: 'x', input: null, references: 'not a list' }]);
    write(join(runDir, 'scenario_state.json'), { request_states: [null, { instance: { id: 'x' }, result: { completions: 'no' } }, { instance: { id: 'x' }, result: { completions: [{ tokens: [null, 5] }] } }] });
    write(join(runDir, 'per_instance_stats.json'), [null, 3, { stats: 'no' }]);
    const run = encodeURIComponent(RUN);
    for (const path of ['suites/odd', 'suites/odd/groups/g', `suites/odd/runs/${run}/instances?q=a`, `suites/odd/runs/${run}/instances/x`, `suites/odd/runs/${run}/calibration`]) {
      const r = await get(`/v1/results/${path}`);
      expect(r.status, `${path}: ${JSON.stringify(r.json)}`).toBe(200);
    }
    write(join(runDir, 'display_predictions.json'), { not: 'a list' });
    const broken = await get(`/v1/results/suites/odd/runs/${run}/instances`);
    expect(broken.status).toBe(422);
    expect(broken.json.error?.message).toBe(`runs/odd/${RUN}/display_predictions.json is not a list of predictions as HELM writes it: run flexhelm summarize again`);
  });

  it('with --suite shows that suite only', async () => {
    const only = await startResultsServer({ outputPath: out, suite: 'v1' });
    try {
      makeSuite(join(out, 'runs', 'other'));
      const suites = (await (await fetch(`${only.url}/v1/results/suites`)).json()) as { data: string[] };
      expect(suites.data).toEqual(['v1']);
      const other = (await (await fetch(`${only.url}/v1/results/suites/other`)).json()) as { error: { message: string } };
      expect(other.error.message).toBe('no suite other: this server shows suite v1 only');
    } finally {
      await only.close();
    }
  });

  it('serves the page with a script-only content security policy, and asks for the key when it has one', async () => {
    const page = await fetch(`${server.url}/results/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await page.text()).toContain('<script src="/results/results.js"></script>');
    const keyed = await startResultsServer({ outputPath: out, apiKey: 'results-key-1' });
    try {
      expect((await fetch(`${keyed.url}/v1/results/suites`)).status).toBe(401);
      expect((await fetch(`${keyed.url}/v1/results/suites`, { headers: { authorization: 'Bearer results-key-1' } })).status).toBe(200);
      expect((await fetch(`${keyed.url}/results/`)).status).toBe(200); // the page itself carries no data
    } finally {
      await keyed.close();
    }
    await expect(startResultsServer({ outputPath: out, host: '0.0.0.0' })).rejects.toThrow(/refusing to bind 0\.0\.0\.0 without an API key/);
    await expect(startResultsServer({ outputPath: join(root, 'nope') })).rejects.toThrow(`no output folder ${join(root, 'nope')}: give --output-path the folder that holds runs/<suite>/`);
  });
});

describe('a read-only output folder', () => {
  // A real read-only mount (root can mount tmpfs); elsewhere the test says why it cannot run.
  const isRoot = process.getuid?.() === 0;
  it.runIf(isRoot)('serves every page from it and writes nothing', async () => {
    const mount = join(root, 'ro');
    mkdirSync(mount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mount]);
    try {
      makeSuite(join(mount, 'runs', 'v1'));
      execFileSync('mount', ['-o', 'remount,ro', mount]);
      expect(() => writeFileSync(join(mount, 'probe'), 'x')).toThrow(/EROFS/);
      const before = readdirSync(join(mount, 'runs', 'v1', RUN)).map((f) => [f, statSync(join(mount, 'runs', 'v1', RUN, f)).mtimeMs]);
      const ro = await startResultsServer({ outputPath: mount });
      try {
        const run = encodeURIComponent(RUN);
        for (const path of ['suites', 'suites/v1', `suites/v1/runs/${run}`, `suites/v1/runs/${run}/instances?page=2`, `suites/v1/runs/${run}/instances/id3`]) {
          const res = await fetch(`${ro.url}/v1/results/${path}`);
          expect(res.status, path).toBe(200);
        }
      } finally {
        await ro.close();
      }
      expect(readdirSync(join(mount, 'runs', 'v1', RUN)).map((f) => [f, statSync(join(mount, 'runs', 'v1', RUN, f)).mtimeMs])).toEqual(before);
    } finally {
      execFileSync('umount', [mount]);
    }
  });
});
