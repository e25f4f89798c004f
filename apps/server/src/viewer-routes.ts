import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { registerResultsSite } from './results-routes.js';
import { ResultsStore } from './results-store.js';

const viewerDir = fileURLToPath(new URL('../viewer/', import.meta.url));
const STATIC: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/viewer.js': { file: 'viewer.js', type: 'text/javascript; charset=utf-8' },
  '/viewer.css': { file: 'viewer.css', type: 'text/css; charset=utf-8' },
};

/** The jobs viewer at `/` and the results site over `outputPath` (`/results/`, `/v1/results/`). */
export function registerViewerRoutes(app: FastifyInstance, outputPath: string): void {
  for (const [url, asset] of Object.entries(STATIC)) {
    app.route({
      method: ['GET', 'HEAD'],
      url,
      handler: async (_req, reply) => reply.type(asset.type).header('cache-control', 'no-cache').send(readFileSync(join(viewerDir, asset.file))),
    });
  }
  registerResultsSite(app, new ResultsStore({ outputPath }));
}
