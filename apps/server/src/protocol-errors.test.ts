// Issue 26 item 12, the servers beside the API: `flexhelm serve-results` answered a bad URL with fastify's own
// `FST_ERR_BAD_URL` JSON, a long query with a bare 431 and malformed HTTP with `{"error":"Bad Request"}`; every server
// answered a request without a Host header with an empty 400. Real servers on loopback, raw sockets.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange, shapedError } from './test-server.js';
import { startLoadingServer, type LoadingServer } from './loading-server.js';
import { startResultsServer, type RunningResultsServer } from './start-results-server.js';

const get = (path: string, headers = 'Host: x\r\n') => `GET ${path} HTTP/1.1\r\n${headers}Connection: close\r\n\r\n`;

/** The cases below the routes, with the status each must get. */
const CASES: [string, string, number][] = [
  ['overlong UTF-8 in a path', get('/results/%c0%ae%c0%ae/x'), 400],
  ['a cut percent-encoding', get('/v1/results/%E0%A4%A'), 400],
  ['a 5,000-character suite name', get(`/v1/results/suites/${'s'.repeat(5000)}`), 414],
  ['a 50 KB query', get(`/results/?q=${'q'.repeat(50_000)}`), 431],
  ['a 40 KB header', get('/healthz', `Host: x\r\nX-Big: ${'h'.repeat(40_000)}\r\n`), 431],
  ['no Host header', get('/healthz', ''), 400],
  ['an unknown method', 'BREW / HTTP/1.1\r\nHost: x\r\n\r\n', 400],
  ['not HTTP', 'hello\r\n\r\n', 400],
  ['a bad Content-Length', 'POST /v1/results HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400],
  ['Content-Length with chunked', 'POST /v1/results HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
];

describe('flexhelm serve-results answers the HTTP layer’s refusals in OpenAI’s shape', () => {
  let server: RunningResultsServer;
  beforeAll(async () => {
    const out = mkdtempSync(join(tmpdir(), 'flexhelm-protocol-errors-'));
    mkdirSync(join(out, 'runs'));
    server = await startResultsServer({ outputPath: out, port: 0 });
  });
  afterAll(() => server?.close());

  it.each(CASES)('%s', async (what, request, status) => {
    expect(shapedError(await rawExchange(server.port, request), what).status).toBe(status);
  });

  it('still serves after all of them', async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});

describe('the loading placeholder answers them in OpenAI’s shape too', () => {
  let server: LoadingServer;
  beforeAll(async () => {
    server = await startLoadingServer('127.0.0.1', 0, 'local/m');
  });
  afterAll(() => server?.close());

  it.each(CASES.filter(([, , status]) => status !== 414))('%s', async (what, request, status) => {
    // The placeholder has no routes: what parses is its 503 "loading", what does not is refused as below the routes.
    const got = shapedError(await rawExchange(server.port, request), what);
    expect([status, 503]).toContain(got.status);
    if (status === 431 || what === 'not HTTP') expect(got.status).toBe(status);
  });
});
