import type { ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Usage } from './completion-service.js';

/** What the API server's parts share about its requests: the lifecycle hooks, the routes and the shutdown. */
export interface RequestState {
  /** Set once shutdown starts: new requests are refused with 503 and readiness says stopping. */
  closing: boolean;
  /** Requests received and not yet answered; shutdown waits for them. */
  inFlight: number;
  /** Job event streams under way, ended at shutdown. */
  jobStreams: Set<ServerResponse>;
  /** Responses that are event streams (a half-close probe may add a comment line to them). */
  eventStreams: WeakSet<ServerResponse>;
  /** Requests whose client went away: their errors are an info line, not an internal error. */
  abandoned: WeakSet<FastifyRequest>;
  /** Token counts of each answered request, for its access-log line. */
  usage: WeakMap<FastifyRequest, Usage>;
  /** Streamed requests whose client asked for the usage chunk (it is always made, for the access log). */
  wantsUsage: WeakSet<FastifyRequest>;
}

export function createRequestState(): RequestState {
  return { closing: false, inFlight: 0, jobStreams: new Set(), eventStreams: new WeakSet(), abandoned: new WeakSet(), usage: new WeakMap(), wantsUsage: new WeakSet() };
}

/** `params` asking for the usage chunk, which the access log always needs; whether the client asked is remembered. */
export function usageForLog<P extends { includeUsage: boolean }>(state: RequestState, req: FastifyRequest, params: P): P {
  if (params.includeUsage) state.wantsUsage.add(req);
  return { ...params, includeUsage: true };
}
