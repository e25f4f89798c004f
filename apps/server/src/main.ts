#!/usr/bin/env node
import { resolve } from 'node:path';
import { resolveDataDir } from '@flexhelm/downloads';
import { OptEngine, readOptConfig } from '@flexhelm/engine';
import { DEFAULT_MODEL, modelFingerprint, resolveModel } from '@flexhelm/runner';
import { registerLocalModel } from '@flexhelm/run-spec';
import { localOptWindowService, loadTokenizerFolder } from '@flexhelm/tokenizer';
import { isLoopback } from './is-loopback.js';
import { parseServerArgs, USAGE } from './server-args.js';
import { startServer } from './start-server.js';

async function main(): Promise<number> {
  let args;
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
  let server;
  try {
    registerLocalModel(helmModel);
    const resolved = await resolveModel({ model, path: args.path, dataDir, offline: args.offline, log });
    const config = resolved.config ?? readOptConfig(resolved.folder);
    const tokenizer = loadTokenizerFolder(resolved.folder, model);
    engine = resolved.config ? await OptEngine.load(resolved.folder, { config: resolved.config }) : await OptEngine.load(resolved.folder);
    server = await startServer({
      engine,
      tokenizer,
      windowService: localOptWindowService(tokenizer, config.maxPositionEmbeddings),
      modelName: helmModel,
      modelId: `${model}@${modelFingerprint(resolved.folder)}`,
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
      log,
    });
  } catch (err) {
    process.stderr.write(`flexhelm-server: ${(err as Error).message}\n`);
    await engine?.close(); // its worker thread would keep the process alive
    return 1;
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
