import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError } from './api-error.js';
import { answerClientErrors, DEFAULT_PROTOCOL_LIMITS } from './protocol-errors.js';

/** How long a connection opened before the handover may take to send its request. */
const CLOSE_GRACE_MS = 1000;

export interface LoadingServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Answers on the server's address while the model loads, so orchestrators can tell "alive, not ready" from "down":
 * `GET /health` (and `/healthz`) is 503 `{"status": "loading"}`, every other request a 503 in OpenAI's error shape
 * with a Retry-After. Closed just before the real server listens on the same port.
 */
export async function startLoadingServer(host: string, port: number, modelName: string): Promise<LoadingServer> {
  // Every request, one without a Host header too, gets the shaped 503 (Node's own Host check answers an empty 400).
  const server = createServer({ requireHostHeader: false, maxHeaderSize: DEFAULT_PROTOCOL_LIMITS.maxHeaderBytes }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const message = `the server is loading ${modelName}; retry when GET /health answers 200`;
    const body = path === '/health' || path === '/healthz' ? { status: 'loading', ...new ApiError(503, message, 'server_error', null, 'model_loading').toJSON() } : new ApiError(503, message, 'server_error', null, 'model_loading').toJSON();
    req.resume();
    const text = JSON.stringify(body);
    res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'retry-after': '5', connection: 'close' });
    res.end(text);
  });
  server.headersTimeout = DEFAULT_PROTOCOL_LIMITS.headersTimeoutMs;
  server.requestTimeout = DEFAULT_PROTOCOL_LIMITS.bodyTimeoutMs;
  answerClientErrors(server, DEFAULT_PROTOCOL_LIMITS);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${host} is already in use: stop what holds it or pass another --port`, { cause: err }) : err),
    );
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    // Stops accepting, then lets a request already on a connection get its 503 (each ends its connection): killing
    // every connection at once reset a client polling in that instant (curl: exit 56) instead of answering it. A
    // connection still silent after the grace is dropped, so the real server never waits on a slow client.
    close: () =>
      new Promise((resolve) => {
        const grace = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        server.close(() => {
          clearTimeout(grace);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
