#!/usr/bin/env node
import { totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { resolveDataDir } from '@flexhelm/downloads';
import { ModelFileError, readOptConfig, type OptEngine } from '@flexhelm/engine';
import { DEFAULT_MODEL, EngineSetupError, openEngine, resolveModel } from '@flexhelm/runner';
import { registerLocalModel } from '@flexhelm/run-spec';
import { localOptWindowService, loadTokenizerFolder } from '@flexhelm/tokenizer';
import { isLoopback } from './is-loopback.js';
import { parseServerArgs, USAGE } from './server-args.js';
import { startServer } from './start-server.js';

async function main(): Promise<number> {
  let args: ReturnType<typeof parseServerArgs>;
  try {
    args = parseServerArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`flexhelm-server: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const log = (m: string) => process.stderr.write(`${m}\n`);
  const model = args.model ?? DEFAULT_MODEL;
  const helmModel = model.includes('/') ? model : `facebook/${model}`;
  const dataDir = resolveDataDir({ dataDir: args.dataDir });
  if (!isLoopback(args.host) && !args.apiKey) {
    process.stderr.write(`flexhelm-server: refusing to bind ${args.host} without an API key: anyone who can reach it could use the model. Pass --api-key (or set FLEXHELM_API_KEY), or bind 127.0.0.1\n`);
    return 1;
  }
  let engine: OptEngine | undefined;
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    registerLocalModel(helmModel);
    const resolved = await resolveModel({ model, path: args.path, dataDir, offline: args.offline, log });
    const config = resolved.config ?? readOptConfig(resolved.folder);
    const tokenizer = loadTokenizerFolder(resolved.folder, model);
    // The same engine opening as flexhelm run: the policy's tiers, checked against the RAM budget and the free disk.
    // Requests arrive later, so the plan is checked for FlexLLMGen's benchmark shape (prompt 512, 32 new tokens).
    const offloadDir = resolve(args.offloadDir ?? join(dataDir, 'offload'));
    const opened = await openEngine({
      model,
      folder: resolved.folder,
      config,
      configOverride: Boolean(resolved.config),
      policy: args.policy,
      offloadDir,
      maxRam: (args.maxRamGiB ?? (totalmem() * 0.8) / 1024 ** 3) * 1024 ** 3,
      workload: { promptLen: Math.min(512, config.maxPositionEmbeddings - 32), genLen: 32 },
      computeDtype: args.computeDtype,
      log,
    });
    engine = opened.engine;
    server = await startServer({
      engine,
      tokenizer,
      windowService: localOptWindowService(tokenizer, config.maxPositionEmbeddings),
      modelName: helmModel,
      modelId: opened.modelId,
      outputPath: resolve(args.outputPath),
      stateDir: args.stateDir && resolve(args.stateDir),
      cachePath: args.cachePath && resolve(args.cachePath),
      dataDir: resolve(dataDir, 'scenarios'),
      offline: args.offline,
      host: args.host,
      port: args.port,
      apiKey: args.apiKey,
      maxBatchSize: args.maxBatchSize,
      batchWindowMs: args.batchWindowMs,
      maxTokens: args.maxTokens,
      maxBodyBytes: args.maxBodyBytes,
      headersTimeoutMs: args.headersTimeoutMs,
      bodyTimeoutMs: args.bodyTimeoutMs,
      keepAliveTimeoutMs: args.keepAliveTimeoutMs,
      maxConnections: args.maxConnections,
      maxRowsPerRequest: args.maxRowsPerRequest,
      maxResponseEntries: args.maxResponseEntries,
      log,
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const full = code === 'ENOSPC' || code === 'EDQUOT' ? ` (the offload directory is full: free space, give another --offload-dir, or put less on disk with --percent)` : '';
    process.stderr.write(`flexhelm-server: ${(err as Error).message}${full}\n`);
    await engine?.close(); // its worker thread would keep the process alive
    // A policy that does not fit, or a full disk, is the user's to fix (like a bad option); anything else is ours.
    return err instanceof EngineSetupError || err instanceof ModelFileError || full ? 2 : 1;
  }
  log(`flexhelm-server: ${helmModel} on ${server.url} (viewer: ${server.url}/)${args.apiKey ? ', API key required' : ''}`);
  const running = server;
  const loaded = engine as OptEngine;
  return new Promise<number>((done) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log(`flexhelm-server: ${signal}: finishing in-flight requests and saving jobs`);
      running
        .close()
        .then(() => loaded.close())
        .then(() => done(0), (err: Error) => {
          log(`flexhelm-server: shutdown failed: ${err.message}`);
          done(1);
        });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}

process.exitCode = await main();
