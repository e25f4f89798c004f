// Requests that once took the server's event loop or answered outside OpenAI's error shape, through a real server on
// loopback: prompts far over the window, many long prompts at once, half-closed sockets, URLs and headers the HTTP
// layer refuses, and the stop-sequence limit.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_STOP_SEQUENCES } from './completion-request.js';
import { parseChatRequest } from './chat-request.js';
import type { RunningServer } from './start-server.js';
import { loadTinyModel, post, rawExchange, serve, shapedError, type TinyModel } from './test-server.js';

let model: TinyModel;
let server: RunningServer;
beforeAll(async () => {
  model = await loadTinyModel();
  server = await serve(model, { outputPath: `${model.root}/out` });
}, 120_000);
afterAll(async () => {
  await server?.close();
  await model?.engine.close();
});

/** Writes `request` on a raw socket, half-closes it (shutdown(SHUT_WR), as `printf … | nc`), and reads until the server closes. */
function halfClosed(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(server.port, '127.0.0.1');
    let data = '';
    const guard = setTimeout(() => socket.destroy(new Error(`no answer in 60 s; got ${JSON.stringify(data.slice(0, 200))}`)), 60_000);
    socket.on('connect', () => socket.end(request));
    socket.on('data', (d) => (data += d.toString()));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(guard);
      resolve(data);
    });
  });
}

const postRequest = (path: string, body: unknown) => {
  const text = JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
};

/** Resolves with the largest /healthz latency seen while `work` runs. */
async function healthzWhile(work: Promise<unknown>): Promise<number> {
  let done = false;
  let worst = 0;
  const watching = (async () => {
    while (!done) {
      const t0 = performance.now();
      const r = await fetch(`${server.url}/healthz`);
      expect(r.status).toBe(200);
      worst = Math.max(worst, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  await work.finally(() => (done = true));
  await watching;
  return worst;
}

describe('prompts over the window', () => {
  it('refuses a 1 M-character prompt from its length alone, without tokenizing it', async () => {
    const t0 = performance.now();
    const r = await post(`${server.url}/v1/completions`, { prompt: 'x'.repeat(1_000_000), max_tokens: 1 });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('context_length_exceeded');
    expect(r.json.error.message).toMatch(/prompt 0 has 1000000 characters, at least \d+ tokens \(a token of this model is at most \d+ characters\)/);
    // Tokenizing it took 29 s on the machine; the length check is microseconds (generous for a loaded machine).
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('keeps /healthz answering while 64 prompts of 16 k characters are tokenized', async () => {
    const prompt = 'hello world '.repeat(1400); // 16.8 k characters, about 2,800 tokens: over the 2048 window once counted
    const work = Promise.all(Array.from({ length: 64 }, () => post(`${server.url}/v1/completions`, { prompt, max_tokens: 1 })));
    const worst = await healthzWhile(work);
    for (const r of await work) expect([r.status, r.json.error.code]).toEqual([400, 'context_length_exceeded']);
    // On the event loop these stalled every other request for 15 s; in the workers /healthz never waits on them.
    expect(worst).toBeLessThan(2_000);
  }, 120_000);
});

describe('a client that half-closes its side after a complete request', () => {
  it('gets its whole answer, not streamed', async () => {
    const data = await halfClosed(postRequest('/v1/completions', { prompt: 'Hello there', max_tokens: 4, temperature: 0 }));
    const [head, body] = splitFinal(data);
    expect(head).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(JSON.parse(body).choices[0].text.length).toBeGreaterThan(0);
  }, 60_000);

  it('gets its whole answer, streamed', async () => {
    const data = await halfClosed(postRequest('/v1/completions', { prompt: 'Hello there', max_tokens: 4, temperature: 0, stream: true }));
    const [head, body] = splitFinal(data);
    expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\ncontent-type: text\/event-stream/);
    expect(body).toContain('data: [DONE]');
  }, 60_000);
});

/** The final response of an exchange (after any interim `102 Processing`): its head and its body, de-chunked. */
function splitFinal(data: string): [string, string] {
  const rest = data.replace(/^(HTTP\/1\.1 102 Processing\r\n\r\n)+/, '');
  const at = rest.indexOf('\r\n\r\n');
  const head = rest.slice(0, at);
  let body = rest.slice(at + 4);
  if (/transfer-encoding: chunked/i.test(head)) {
    let out = '';
    for (let i = 0; ; ) {
      const eol = body.indexOf('\r\n', i);
      const size = Number.parseInt(body.slice(i, eol), 16);
      if (!size) break;
      out += body.slice(eol + 2, eol + 2 + size);
      i = eol + 2 + size + 2;
    }
    body = out;
  }
  return [head, body];
}

describe('every error in OpenAI’s shape', () => {
  const shaped = (status: number, text: string, what: string) => {
    const json = JSON.parse(text) as { error?: Record<string, unknown> };
    expect(Object.keys(json.error ?? {}).sort(), what).toEqual(['code', 'message', 'param', 'type']);
    expect(typeof json.error!.message, what).toBe('string');
    expect(json.error!.type, what).toBe(status >= 500 ? 'server_error' : 'invalid_request_error');
  };

  it('answers bad URL encodings, long paths, long queries, huge headers, 404 and 405 alike', async () => {
    const cases: [string, RequestInit, number][] = [
      ['/results/%c0%ae%c0%ae/x', {}, 400],
      ['/v1/runs/%E0%A4%A', {}, 400],
      [`/v1/runs/${'a'.repeat(5000)}`, {}, 414],
      [`/results/${'s'.repeat(5000)}/x`, {}, 404], // the results site's pages take any name and answer 404 for unknown suites
      [`/v1/models?q=${'q'.repeat(50_000)}`, {}, 431],
      ['/v1/models', { headers: { 'x-big': 'h'.repeat(40_000) } }, 431],
      ['/v1/nothing-here', {}, 404],
      ['/nothing-here', {}, 404],
      ['/v1/models', { method: 'DELETE' }, 405],
      ['/v1/completions', { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } }, 400],
    ];
    for (const [path, init, status] of cases) {
      const r = await fetch(`${server.url}${path}`, init);
      const what = `${init.method ?? 'GET'} ${path.slice(0, 60)}`;
      expect(r.status, what).toBe(status);
      expect(r.headers.get('content-type'), what).toMatch(/^application\/json/);
      shaped(status, await r.text(), what);
    }
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('answers a request without a Host header, and malformed HTTP, in the shape too', async () => {
    const cases: [string, string, number][] = [
      ['no Host header', 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n', 400],
      ['no Host header on a POST', postRequest('/v1/completions', { prompt: 'a', max_tokens: 1 }).replace('Host: x\r\n', ''), 400],
      ['an unknown method', 'BREW / HTTP/1.1\r\nHost: x\r\n\r\n', 400],
      ['a bad chunk size', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n', 400],
    ];
    for (const [what, request, status] of cases) expect(shapedError(await rawExchange(server.port, request), what).status, what).toBe(status);
    // HTTP/1.0 has no Host requirement.
    expect(await rawExchange(server.port, 'GET /healthz HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('shows a 5,000-character unknown path cut, not whole', async () => {
    const r = await fetch(`${server.url}/v1/${'p'.repeat(5000)}`);
    expect(r.status).toBe(404);
    const json = (await r.json()) as { error: { message: string } };
    expect(json.error.message).toMatch(/^no endpoint GET \/v1\/p{196}… \(5004 characters\)$/);
  });
});

describe('stop sequences', () => {
  it('have one limit for completions and chat, named in the message', async () => {
    const stop = Array.from({ length: MAX_STOP_SEQUENCES + 1 }, (_, i) => `s${i}`);
    const r = await post(`${server.url}/v1/completions`, { prompt: 'Hi', max_tokens: 1, stop });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ param: 'stop', message: `stop has ${MAX_STOP_SEQUENCES + 1} entries, above this server's limit of ${MAX_STOP_SEQUENCES} stop sequences; send fewer` });
    expect(() => parseChatRequest({ messages: [{ role: 'user', content: 'x' }], stop }, { maxTokens: 8, maxN: 1, maxPrompts: 1 })).toThrow(r.json.error.message);
    // The limit itself is accepted by both.
    const ok = await post(`${server.url}/v1/completions`, { prompt: 'Hi', max_tokens: 1, stop: stop.slice(1) });
    expect(ok.status).toBe(200);
    expect(parseChatRequest({ messages: [{ role: 'user', content: 'x' }], stop: stop.slice(1) }, { maxTokens: 8, maxN: 1, maxPrompts: 1 }).stop).toHaveLength(MAX_STOP_SEQUENCES);
  }, 60_000);
});
