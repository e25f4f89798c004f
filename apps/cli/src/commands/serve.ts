import type { Command } from '../command.js';

/**
 * `flexhelm serve`: the OpenAI-compatible server. Its options are the server's own (apps/server parses them; `flexhelm
 * serve --help` lists them), so the two can never disagree.
 */
export const serveCommand: Command = {
  name: 'serve',
  summary: 'Serve a model over HTTP: OpenAI-compatible completions and chat, HELM jobs and the results viewer',
  options: {},
  ownArguments: true,
  async run({ positionals, stdout, stderr }) {
    // Loaded on use: the server's modules (fastify, the chat template engine) are not needed by the other commands.
    const { serveMain } = await import('@flexhelm/server');
    return serveMain(positionals, 'flexhelm serve', { stdout, stderr });
  },
};
