import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import type { ResultsStore } from './results-store.js';

const siteDir = fileURLToPath(new URL('../results-site/', import.meta.url));
const JS = 'text/javascript; charset=utf-8';
// Browser builds shipped inside npm dependencies, served from node_modules as they are (the site works offline).
const vendor = createRequire(import.meta.url);
const ASSETS: Record<string, { path: string; type: string }> = {
  '/results': { path: join(siteDir, 'index.html'), type: 'text/html; charset=utf-8' },
  '/results/results.js': { path: join(siteDir, 'results.js'), type: JS },
  '/results/results.css': { path: join(siteDir, 'results.css'), type: 'text/css; charset=utf-8' },
  // Group descriptions are Markdown: marked renders them, DOMPurify keeps only an allow-list of tags and attributes.
  '/results/vendor/marked.js': { path: join(dirname(vendor.resolve('marked/package.json')), 'lib', 'marked.umd.js'), type: JS },
  '/results/vendor/purify.js': { path: vendor.resolve('dompurify/dist/purify.min.js'), type: JS },
};
/** Model outputs are hostile: the page builds everything as text, and the browser runs no script but ours. */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function intParam(req: FastifyRequest, name: string, fallback: number): number {
  const raw = (req.query as Record<string, string | undefined>)[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,9}$/.test(raw)) throw new ApiError(400, `${name} must be a whole number, not ${JSON.stringify(raw.slice(0, 40))}`, 'invalid_request_error', name);
  return Number(raw);
}

function stringParam(req: FastifyRequest, name: string, fallback?: string): string {
  const raw = (req.query as Record<string, unknown>)[name];
  if (raw === undefined) {
    if (fallback !== undefined) return fallback;
    throw new ApiError(400, `give ?${name}=`, 'invalid_request_error', name);
  }
  if (typeof raw !== 'string') throw new ApiError(400, `give ${name} once`, 'invalid_request_error', name);
  return raw;
}

/**
 * The results site: its static page under /results/ and its read-only JSON under /v1/results/ (behind the API key
 * when the server has one, like every /v1 route).
 */
export function registerResultsSite(app: FastifyInstance, store: ResultsStore): void {
  for (const [url, asset] of Object.entries(ASSETS)) {
    app.route({
      method: ['GET', 'HEAD'],
      url,
      handler: async (_req, reply) =>
        reply.type(asset.type).header('cache-control', 'no-cache').header('content-security-policy', CSP).header('x-content-type-options', 'nosniff').send(readFileSync(asset.path)),
    });
  }
  type P = Record<string, string>;
  const params = (req: FastifyRequest) => req.params as P;
  app.get('/v1/results/suites', async () => ({ object: 'list', data: store.suites() }));
  app.get('/v1/results/suites/:suite', async (req) => store.suite(params(req).suite!));
  app.get('/v1/results/suites/:suite/groups/:group', async (req) => store.group(params(req).suite!, params(req).group!));
  app.get('/v1/results/suites/:suite/runs/:run', async (req) => store.run(params(req).suite!, params(req).run!));
  app.get('/v1/results/suites/:suite/runs/:run/calibration', async (req) => store.calibration(params(req).suite!, params(req).run!, stringParam(req, 'split', 'test')));
  app.get('/v1/results/suites/:suite/runs/:run/instances', async (req) =>
    store.instances(params(req).suite!, params(req).run!, intParam(req, 'page', 1), intParam(req, 'size', 25), stringParam(req, 'q', '')),
  );
  app.get('/v1/results/suites/:suite/runs/:run/instances/:id', async (req) => store.instance(params(req).suite!, params(req).run!, params(req).id!));
  app.get('/v1/results/suites/:suite/compare', async (req) =>
    store.compare(params(req).suite!, stringParam(req, 'a'), stringParam(req, 'b'), intParam(req, 'page', 1), intParam(req, 'size', 25), stringParam(req, 'only', 'all')),
  );
}
