import { startResultsServer } from '@flexhelm/server';
import type { Command } from '../command.js';
import { integerOption } from '../option-values.js';

/** `flexhelm serve-results`: the server's results site over a folder of finished runs, without loading a model. */
export const serveResultsCommand: Command = {
  name: 'serve-results',
  summary: 'Serve the results site (leaderboards, runs, instances, comparisons) over finished runs, without a model',
  options: {
    'output-path': { type: 'string', short: 'o', valueName: 'DIR', description: 'HELM output folder holding runs/<suite>/ (default benchmark_output)' },
    suite: { type: 'string', valueName: 'S', description: 'show only this suite' },
    host: { type: 'string', valueName: 'H', description: 'address to bind (default 127.0.0.1; any other needs an API key)' },
    port: { type: 'string', valueName: 'N', description: 'port (default 8000; 0 picks a free one)' },
    'api-key': { type: 'string', valueName: 'KEY', description: 'bearer token the site asks for (or env FLEXHELM_API_KEY)' },
  },
  details: [
    'Read-only: nothing outside DIR is read and nothing is written. The site is at http://HOST:PORT/results/ and reads',
    'what `flexhelm summarize --suite S` writes (run_specs.json, groups.json, groups/<group>.json, each run\'s',
    'instances.json, display_predictions.json, display_requests.json) beside each run\'s five files.',
    'SIGINT/SIGTERM stop it.',
  ].join('\n'),
  async run({ options, stderr, usageError }) {
    const port = integerOption(options.port, 'port', 0) ?? 8000;
    if (port > 65535) throw usageError(`--port must be at most 65535, not ${port}`);
    const apiKey = (options['api-key'] as string | undefined) ?? process.env.FLEXHELM_API_KEY;
    let server: Awaited<ReturnType<typeof startResultsServer>>;
    try {
      server = await startResultsServer({
        outputPath: (options['output-path'] as string | undefined) ?? 'benchmark_output',
        suite: options.suite as string | undefined,
        host: (options.host as string | undefined) ?? '127.0.0.1',
        port,
        apiKey: apiKey || undefined,
        log: (m) => stderr.write(`${m}\n`),
      });
    } catch (err) {
      throw usageError((err as Error).message);
    }
    stderr.write(`flexhelm serve-results: ${server.url}/results/\n`);
    await new Promise<void>((done) => {
      const stop = (signal: string) => {
        stderr.write(`flexhelm serve-results: ${signal}: stopping\n`);
        void server.close().then(done, done);
      };
      process.once('SIGINT', () => stop('SIGINT'));
      process.once('SIGTERM', () => stop('SIGTERM'));
    });
  },
};
