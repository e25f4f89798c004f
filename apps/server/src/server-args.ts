import { parseArgs } from 'node:util';

export interface ServerArgs {
  help: boolean;
  model?: string;
  path?: string;
  dataDir?: string;
  outputPath: string;
  stateDir?: string;
  cachePath?: string;
  host: string;
  port: number;
  apiKey?: string;
  maxBatchSize: number;
  batchWindowMs: number;
  maxTokens: number;
  maxBodyBytes: number;
  offline: boolean;
}

export const USAGE = `usage: flexhelm-server [options]

OpenAI-compatible completions (POST /v1/completions, GET /v1/models), HELM evaluation jobs (/v1/runs) and a
results viewer (/) on one local OPT model.

  --model M             OPT model, e.g. facebook/opt-125m (default: the embedded flexhelm/opt-tiny-random)
  --path DIR            folder with the weights (default: the download cache)
  --data-dir DIR        downloaded models and datasets (default $FLEXHELM_DATA_DIR or ~/.cache/flexhelm)
  --output-path DIR     HELM output folder for jobs (default benchmark_output)
  --state-dir DIR       job records (default <output-path>/server/jobs)
  --cache-path FILE     request cache (default <output-path>/cache/<model>.sqlite, shared with flexhelm run)
  --host H              address to bind (default 127.0.0.1; any other needs an API key)
  --port N              port (default 8000; 0 picks a free one)
  --api-key KEY         bearer token required on /v1 (or env FLEXHELM_API_KEY)
  --max-batch-size N    rows per engine batch (default 8)
  --batch-window-ms N   how long a batch waits for more requests (default 10)
  --max-tokens N        largest max_tokens accepted (default 512)
  --max-body-bytes N    largest request body (default 1048576)
  --offline             never download models or datasets
  -h, --help            this text
`;

function integer(value: string | undefined, flag: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value.trim()) || Number(value) < min) throw new Error(`--${flag} must be an integer ≥ ${min}, got '${value}'`);
  return Number(value);
}

/** Command-line options of `flexhelm-server`; a bad value throws an Error saying which and why. */
export function parseServerArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): ServerArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      model: { type: 'string' },
      path: { type: 'string' },
      'data-dir': { type: 'string' },
      'output-path': { type: 'string' },
      'state-dir': { type: 'string' },
      'cache-path': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'api-key': { type: 'string' },
      'max-batch-size': { type: 'string' },
      'batch-window-ms': { type: 'string' },
      'max-tokens': { type: 'string' },
      'max-body-bytes': { type: 'string' },
      offline: { type: 'boolean' },
    },
  });
  const port = integer(values.port, 'port', 8000, 0);
  if (port > 65535) throw new Error(`--port must be at most 65535, got ${port}`);
  return {
    help: Boolean(values.help),
    model: values.model,
    path: values.path,
    dataDir: values['data-dir'],
    outputPath: values['output-path'] ?? 'benchmark_output',
    stateDir: values['state-dir'],
    cachePath: values['cache-path'],
    host: values.host ?? '127.0.0.1',
    port,
    apiKey: values['api-key'] ?? (env.FLEXHELM_API_KEY || undefined),
    maxBatchSize: integer(values['max-batch-size'], 'max-batch-size', 8, 1),
    batchWindowMs: integer(values['batch-window-ms'], 'batch-window-ms', 10, 0),
    maxTokens: integer(values['max-tokens'], 'max-tokens', 512, 1),
    maxBodyBytes: integer(values['max-body-bytes'], 'max-body-bytes', 1024 * 1024, 1024),
    offline: Boolean(values.offline),
  };
}
