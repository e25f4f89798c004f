import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LoopbackFileServer } from '@flexhelm/downloads/testing';
import { DownloadError } from '@flexhelm/downloads';
import { expect } from 'vitest';
import type { ScenarioContext } from './scenario.js';

/** The path a `baseUrl` mirror serves an original URL at (see `sourceUrl`). */
function mirrorPath(url: string): string {
  const original = new URL(url);
  return `/${original.host}${original.pathname}`;
}

/** A loopback server standing in for a scenario's hosts, and a fresh output folder per test. */
export interface SourceFixture {
  server: LoopbackFileServer;
  dir: string;
  context: ScenarioContext;
  close(): Promise<void>;
}

export async function sourceFixture(files: Record<string, string | Uint8Array>): Promise<SourceFixture> {
  const server = await LoopbackFileServer.start();
  for (const [url, body] of Object.entries(files)) server.set(mirrorPath(url), body);
  const dir = await mkdtemp(join(tmpdir(), 'flexhelm-scenario-'));
  return {
    server,
    dir,
    context: { outputPath: join(dir, 'out'), baseUrl: server.baseUrl },
    async close() {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Runs `getInstances` offline in an empty folder and checks the error names the source URL and where to put it. */
export async function expectOfflineError(getInstances: (context: ScenarioContext) => Promise<unknown>, url: string): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'flexhelm-offline-'));
  try {
    const error = await getInstances({ outputPath: join(dir, 'out'), offline: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DownloadError);
    expect((error as DownloadError).failure).toBe('offline');
    expect((error as DownloadError).message).toContain(url);
    expect((error as DownloadError).message).toContain(join(dir, 'out'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
