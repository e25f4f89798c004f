// Test helpers (not built): a tiny random OPT with an OPT-shaped tokenizer, loaded once per test file, and servers on it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OptEngine } from '@flexhelm/engine';
import { localOptWindowService, loadTokenizerFolder, type HuggingFaceTokenizer } from '@flexhelm/tokenizer';
import { registerLocalModel } from '@flexhelm/run-spec';
import { startServer, type RunningServer, type ServerOptions } from './start-server.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';

export const MODEL_NAME = 'local/tiny-opt';

export interface TinyModel {
  root: string;
  modelDir: string;
  engine: OptEngine;
  tokenizer: HuggingFaceTokenizer;
}

export async function loadTinyModel(): Promise<TinyModel> {
  const root = mkdtempSync(join(tmpdir(), 'flexhelm-server-'));
  const modelDir = join(root, 'tiny-opt');
  makeTinyOptModel(modelDir, 11);
  registerLocalModel(MODEL_NAME);
  const engine = await OptEngine.load(modelDir);
  return { root, modelDir, engine, tokenizer: loadTokenizerFolder(modelDir, MODEL_NAME) };
}

export function serve(model: TinyModel, options: Partial<ServerOptions> & { outputPath: string }): Promise<RunningServer> {
  return startServer({
    engine: model.engine,
    tokenizer: model.tokenizer,
    windowService: localOptWindowService(model.tokenizer, model.engine.config.maxPositionEmbeddings),
    modelName: MODEL_NAME,
    modelId: 'tiny-opt-seed11',
    tokenizerFolder: model.modelDir,
    offline: true,
    ...options,
  });
}

// biome-ignore lint/suspicious/noExplicitAny: tests read response fields directly and assert their values
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

// biome-ignore lint/suspicious/noExplicitAny: tests read response fields directly and assert their values
export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { headers });
  return { status: res.status, json: await res.json() };
}
