import { resolve } from 'node:path';
import { resolveDataDir } from '@flexhelm/downloads';
import { ModelFileError } from '@flexhelm/engine';
import { DEFAULT_MODEL } from '@flexhelm/runner';
import { registerLocalModel } from '@flexhelm/run-spec';
import { formatGiB } from '@flexhelm/offload';
import { commandLineMessage, defaultCachePath, EngineSetupError, helmModelName, joinNegativeValues, maxRamBytes, openSession, OptionError, SessionInputError, type Session } from '@flexhelm/session';
import { isLoopback } from './is-loopback.js';
import { parseServerArgs, USAGE } from './server-args.js';
import { readChatSetup } from './chat-setup.js';
import { ChatTemplateError } from './chat-template.js';
import { startLoadingServer, type LoadingServer } from './loading-server.js';
import { serverRamParts } from './server-memory-plan.js';
import { startServer } from './start-server.js';

const GiB = 2 ** 30;

/**
 * The server's command line, whole: parses `argv` (the server's options, nowhere else), opens the model, serves until
 * SIGTERM or SIGINT, and resolves to the exit status. `name` is how messages and the usage name the command
 * (`flexhelm serve` runs it too, passing its streams: usage, errors and the log go there).
 */
export async function serveMain(
  argv: string[],
  name = 'flexhelm-server',
  streams: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream } = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  // Node and every module the server loads, before the model: the baseline its RAM plan measures.
  const startRss = process.memoryUsage().rss;
  const usage = USAGE.replace('usage: flexhelm-server', `usage: ${name}`);
  let args: ReturnType<typeof parseServerArgs>;
  try {
    args = parseServerArgs(joinNegativeValues(argv));
  } catch (err) {
    streams.stderr.write(`${name}: ${commandLineMessage(err, usage.match(/--[a-z][a-z0-9-]*/g) ?? [])}\nrun \`${name} --help\` for the options\n`);
    return 2;
  }
  if (args.help) {
    streams.stdout.write(usage);
    return 0;
  }
  const log = (m: string) => streams.stderr.write(`${m}\n`);
  // `--path DIR` alone is `--model DIR`, as in every flexhelm command; with --model it is the folder of its weights.
  const model = args.model ?? args.path ?? DEFAULT_MODEL;
  const helmModel = helmModelName(model);
  const dataDir = resolveDataDir({ dataDir: args.dataDir });
  if (!isLoopback(args.host) && !args.apiKey) {
    streams.stderr.write(`${name}: refusing to bind ${args.host} without an API key: anyone who can reach it could use the model. Pass --api-key (or set FLEXHELM_API_KEY), or bind 127.0.0.1\n`);
    return 1;
  }
  // The whole process within --max-ram: the server's threads (at their heap caps) and modules are set aside first,
  // and the model's plan (weights, KV cache, workspace, the engine's runtime) must fit what is left.
  const maxRam = maxRamBytes(args.maxRamGiB);
  const reserved = serverRamParts({ jobWorkerHeapMiB: args.jobWorkerHeapMiB, startRssBytes: startRss });
  if (reserved.bytes >= maxRam) {
    streams.stderr.write(`${name}: --max-ram ${formatGiB(maxRam)} leaves nothing for the model: the server itself takes up to ${formatGiB(reserved.bytes)} (${reserved.text}); raise --max-ram, or lower --job-worker-heap-mib\n`);
    return 2;
  }
  const modelRam = maxRam - reserved.bytes;
  let session: Session | undefined;
  let server: Awaited<ReturnType<typeof startServer>>;
  let loading: LoadingServer | undefined;
  try {
    registerLocalModel(helmModel);
    // Alive while the model loads: /health answers 503 "loading" until the real server takes the port.
    loading = await startLoadingServer(args.host, args.port, args.servedModelName ?? helmModel);
    log(`${name}: loading ${helmModel}; GET /health answers 503 until it is ready (port ${loading.port})`);
    // The same session opening as flexhelm run and worker: the policy (`auto` parts searched), checked against the RAM
    // budget and the free disk. Requests arrive later, so the plan is checked for FlexLLMGen's benchmark shape (prompt
    // 512, 32 new tokens, a block of 64 sequences).
    session = await openSession({
      model, path: args.model === undefined ? undefined : args.path, dataDir, offline: args.offline, policy: args.policyRequest, percentDefault: 'resident',
      offloadDir: args.offloadDir, maxRamGiB: modelRam / GiB, computeDtype: args.computeDtype,
      workload: (description) => ({ promptLen: Math.min(512, description.maxPositions - 32), genLen: 32, numSequences: 64 }),
      cachePath: resolve(args.cachePath ?? defaultCachePath(resolve(args.outputPath), helmModel)),
      log,
    });
    const { engine, tokenizer, windowService, policy } = session;
    // The figure to compare a process's RSS with (bench/mixed-load.mjs reads this line).
    log(`server RAM plan ${formatGiB(session.plan.ramBytes + reserved.bytes)} of ${formatGiB(maxRam)} (--max-ram): the model's ${formatGiB(session.plan.ramBytes)} and the server's ${formatGiB(reserved.bytes)}: ${reserved.text}`);
    const chat = readChatSetup(session.folder, tokenizer, engine.description.eosTokenId, engine.description.family);
    if (chat) log(`chat completions: the model's chat template from ${chat.template.file}; turns end at token ids ${chat.endTokenIds.join(', ')}`);
    const port = loading.port;
    await loading.close();
    loading = undefined;
    server = await startServer({
      engine,
      tokenizer,
      windowService,
      chat,
      tokenizerFolder: session.folder,
      modelName: helmModel,
      servedModelName: args.servedModelName,
      accessLog: args.accessLog ? log : undefined,
      modelId: session.modelId,
      outputPath: resolve(args.outputPath),
      stateDir: args.stateDir && resolve(args.stateDir),
      cache: session.cache,
      dataDir: resolve(dataDir, 'scenarios'),
      helmDataDir: dataDir,
      offline: args.offline,
      host: args.host,
      port,
      apiKey: args.apiKey,
      maxBatchSize: args.maxBatchSize ?? policy.gpuBatchSize * policy.numGpuBatches,
      batchWindowMs: args.batchWindowMs,
      maxTokens: args.maxTokens,
      maxBodyBytes: args.maxBodyBytes,
      headersTimeoutMs: args.headersTimeoutMs,
      bodyTimeoutMs: args.bodyTimeoutMs,
      keepAliveTimeoutMs: args.keepAliveTimeoutMs,
      maxConnections: args.maxConnections,
      maxRowsPerRequest: args.maxRowsPerRequest,
      maxResponseEntries: args.maxResponseEntries,
      maxStreamBufferBytes: args.maxStreamBufferBytes,
      jobLimits: args.jobLimits,
      jobWorkerHeapMiB: args.jobWorkerHeapMiB,
      log,
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const full = code === 'ENOSPC' || code === 'EDQUOT' ? ` (the offload directory is full: free space, give another --offload-dir, or put less on disk with --percent)` : '';
    // The model's budget is --max-ram less the server's own share: say so where the budget is what refused.
    const share = err instanceof EngineSetupError && /--max-ram|budget/.test((err as Error).message) ? ` (the model's budget is --max-ram ${formatGiB(maxRam)} less ${formatGiB(reserved.bytes)} the server itself takes: ${reserved.text})` : '';
    streams.stderr.write(`${name}: ${(err as Error).message}${full}${share}\n`);
    await loading?.close();
    await session?.close(); // the engine's worker thread would keep the process alive
    // A policy that does not fit, or a full disk, is the user's to fix (like a bad option); anything else is ours.
    return err instanceof EngineSetupError || err instanceof OptionError || err instanceof SessionInputError || err instanceof ModelFileError || err instanceof ChatTemplateError || full ? 2 : 1;
  }
  log(`${name}: ${args.servedModelName ?? helmModel} on ${server.url} (viewer: ${server.url}/)${args.apiKey ? ', API key required' : ''}`);
  const running = server;
  const opened = session;
  return new Promise<number>((done) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log(`${name}: ${signal}: finishing in-flight requests and saving jobs`);
      running
        .close()
        .then(() => opened.close())
        .then(() => done(0), (err: Error) => {
          log(`${name}: shutdown failed: ${err.message}`);
          done(1);
        });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}

