import type { FastifyInstance } from 'fastify';
import type { RequestState } from './request-state.js';
import type { ServerServices } from './server-services.js';

export interface ShutdownContext {
  app: FastifyInstance;
  state: RequestState;
  services: Pick<ServerServices, 'batcher' | 'jobs' | 'textWorkers' | 'chatWorkers' | 'cache'>;
  /** How long in-flight requests may take to finish before their connections are closed (ms). */
  graceMs: number;
  log: (message: string) => void;
}

/**
 * The graceful stop: refuse new requests, save running jobs for resumption, end job event streams, wait up to the
 * grace period for in-flight requests, close every connection, then the batcher, the text workers and the cache.
 */
export async function shutdownServer(ctx: ShutdownContext): Promise<void> {
  const { app, state, log } = ctx;
  const { batcher, jobs, textWorkers, chatWorkers, cache } = ctx.services;
  state.closing = true;
  const stopped = app.close();
  await jobs.stop();
  for (const s of state.jobStreams) s.end();
  const deadline = Date.now() + ctx.graceMs;
  while ((state.inFlight > 0 || batcher.inFlight > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  app.server.closeIdleConnections();
  if (state.inFlight > 0) log(`shutdown grace period over: closing ${state.inFlight} unfinished request(s)`);
  app.server.closeAllConnections();
  await stopped;
  await batcher.idle();
  await Promise.all([textWorkers.close(), chatWorkers?.close()]);
  cache.close();
}
