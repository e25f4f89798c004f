// Test helpers (not built): a tiny random OPT with an OPT-shaped tokenizer, loaded once per test file, and servers on it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '@flexhelm/engine';
import { localOptWindowService, loadTokenizerFolder, type HuggingFaceTokenizer } from '@flexhelm/tokenizer';
import { registerLocalModel } from '@flexhelm/run-spec';
import { startServer, type RunningServer, type ServerOptions } from './start-server.js';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { expect } from 'vitest';
import { OrtBackend } from '@flexhelm/ort-backend';

export const MODEL_NAME = 'local/tiny-opt';

export interface TinyModel {
  root: string;
  modelDir: string;
  engine: Engine;
  tokenizer: HuggingFaceTokenizer;
}

export async function loadTinyModel(): Promise<TinyModel> {
  const root = mkdtempSync(join(tmpdir(), 'flexhelm-server-'));
  const modelDir = join(root, 'tiny-opt');
  makeTinyOptModel(modelDir, 11);
  registerLocalModel(MODEL_NAME);
  const engine = await Engine.load(modelDir, { backend: new OrtBackend() });
  return { root, modelDir, engine, tokenizer: loadTokenizerFolder(modelDir, MODEL_NAME) };
}

export function serve(model: TinyModel, options: Partial<ServerOptions> & { outputPath: string }): Promise<RunningServer> {
  return startServer({
    engine: model.engine,
    tokenizer: model.tokenizer,
    windowService: localOptWindowService(model.tokenizer, model.engine.description.maxPositions),
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

/** A `flexhelm-server` binary (dist/bin.js) started in its own process. */
export interface ServerProcess {
  child: ChildProcess;
  /** The address it printed, once it serves. */
  url: string;
  /** Its exit status, once it has exited. */
  exited: Promise<number | null>;
  stderr: () => string;
}

/**
 * Starts the built server binary with `args` and resolves once it prints the address it serves on (rejects with its
 * stderr if it exits first). It is SIGKILLed after `killAfterMs`, so a test can never leave it behind.
 */
export async function spawnServerBinary(args: string[], killAfterMs: number): Promise<ServerProcess> {
  const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const guard = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  let stderr = '';
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve(code);
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (m) resolve(m[1]!);
    });
    child.on('exit', () => reject(new Error(`server exited early: ${stderr}`)));
  });
  return { child, url, exited, stderr: () => stderr };
}

/** Writes `request` on a raw socket and reads until the server closes it (or 5 s pass on a kept-alive one). */
export function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let data = '';
    const guard = setTimeout(() => socket.destroy(), 5_000);
    socket.on('data', (d) => {
      data += d.toString('latin1');
      // A complete answer with a Content-Length is enough; the connection may be kept alive.
      const m = /\r\ncontent-length: (\d+)\r\n[\s\S]*?\r\n\r\n/i.exec(data);
      if (m && data.length >= m.index + m[0].length + Number(m[1])) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(guard);
      resolve(data);
    });
  });
}

/** Status and JSON body of a raw answer; fails unless the body is OpenAI's error shape. */
export function shapedError(answer: string, what: string): { status: number; code: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
  expect(status, `${what}: ${answer.slice(0, 120)}`).toBeGreaterThanOrEqual(400);
  expect(answer, what).toMatch(/\r\ncontent-type: application\/json/i);
  const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  const json = JSON.parse(body) as { error?: Record<string, unknown> };
  expect(Object.keys(json.error ?? {}).sort(), `${what}: ${body.slice(0, 200)}`).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof json.error!.message, what).toBe('string');
  return { status, code: json.error!.code };
}

