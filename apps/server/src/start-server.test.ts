import { connect, type Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompletionService } from './completion-service.js';
import type { JobRecord } from './job-record.js';
import type { RunningServer } from './start-server.js';
import { get, loadTinyModel, MODEL_NAME, post, serve, type TinyModel } from './test-server.js';

let model: TinyModel;
beforeAll(async () => {
  model = await loadTinyModel();
}, 120_000);
afterAll(async () => {
  await model?.engine.close();
});

interface RawExchange {
  /** Everything the server sent before closing. */
  data: string;
  /** When the server closed the connection, in ms after it opened. */
  closedAfterMs: number;
}

/** Opens a raw TCP connection, lets `drive` write to it, and resolves when the server closes it. */
function raw(port: number, drive: (socket: Socket) => void): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const opened = Date.now();
    let data = '';
    const guard = setTimeout(() => socket.destroy(new Error('the server kept the connection open for 60 s')), 60_000);
    socket.on('connect', () => drive(socket));
    socket.on('data', (d) => (data += d.toString()));
    socket.on('error', (err) => (err.message.includes('60 s') ? reject(err) : undefined));
    socket.on('close', () => {
      clearTimeout(guard);
      resolve({ data, closedAfterMs: Date.now() - opened });
    });
  });
}

describe('connection limits', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await serve(model, { outputPath: `${model.root}/out-limits`, headersTimeoutMs: 1_000, bodyTimeoutMs: 1_500, keepAliveTimeoutMs: 1_000 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('cuts a body trickled one byte every 2 s with 408 in OpenAI’s error shape', async () => {
    let timer: NodeJS.Timeout | undefined;
    const r = await raw(server.port, (socket) => {
      socket.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{');
      timer = setInterval(() => socket.writable && socket.write(' '), 2_000);
    });
    clearInterval(timer);
    expect(r.data).toMatch(/^HTTP\/1\.1 408 /);
    const body = JSON.parse(r.data.slice(r.data.indexOf('\r\n\r\n') + 4));
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'request_timeout' });
    expect(body.error.message).toMatch(/whole body within 1500 ms/);
    // The whole body would take 80 s; the cut comes after the configured 1.5 s (generous bound for a loaded machine).
    expect(r.closedAfterMs).toBeLessThan(15_000);
  });

  it('closes a connection that sends nothing, and a keep-alive connection left idle', async () => {
    const silent = await raw(server.port, () => {});
    expect(silent.closedAfterMs).toBeLessThan(15_000);
    let answeredAt = 0;
    const idle = await raw(server.port, (socket) => {
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
      socket.once('data', () => (answeredAt = Date.now()));
    });
    expect(idle.data).toMatch(/^HTTP\/1\.1 200 /);
    expect(idle.data).toContain('{"status":"ok"}');
    expect(answeredAt).toBeGreaterThan(0);
    expect(idle.closedAfterMs).toBeLessThan(15_000);
  });

  it('does not cut an event stream that lasts longer than the request timeouts', async () => {
    const created = await post(`${server.url}/v1/runs`, { descriptions: ['synthetic_reasoning:mode=pattern_match'], max_eval_instances: 24, num_train_trials: 1, suite: 'long' });
    expect(created.status).toBe(201);
    const res = await fetch(`${server.url}/v1/runs/${created.json.id}/events`);
    const text = await res.text();
    const events = [...text.matchAll(/^event: (\w+)\ndata: (.*)$/gm)].map((m) => ({ event: m[1], job: JSON.parse(m[2]!) as JobRecord }));
    expect(events.at(-1)).toMatchObject({ event: 'end', job: { status: 'succeeded' } });
  });
});

describe('client disconnects', () => {
  it('a completion whose client hangs up is never logged as an internal error', async () => {
    const logs: string[] = [];
    const server = await serve(model, { outputPath: `${model.root}/out-hangup`, log: (m) => logs.push(m) });
    try {
      const body = JSON.stringify({ prompt: 'Hello', max_tokens: 32, temperature: 0 });
      const socket = connect(server.port, '127.0.0.1');
      await new Promise((r) => socket.once('connect', r));
      socket.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      while (server.batcher.inFlight === 0 && server.batcher.stats.requests === 0) await new Promise((r) => setTimeout(r, 1));
      socket.destroy();
      await server.batcher.idle();
      const after = await post(`${server.url}/v1/completions`, { prompt: 'Hello', max_tokens: 2, temperature: 0 });
      expect(after.status).toBe(200);
      expect(logs.filter((l) => /internal error/.test(l))).toEqual([]);
    } finally {
      await server.close();
    }
  });
});

describe('a streaming client that stops reading', () => {
  it('is dropped once more than --max-stream-buffer bytes wait for it: one log line, its rows cancelled, others served', async () => {
    const logs: string[] = [];
    const server = await serve(model, { outputPath: `${model.root}/out-slow`, maxStreamBufferBytes: 64 * 1024, maxResponseEntries: 1_000_000, maxTokens: 512, log: (m) => logs.push(m) });
    try {
      // 64 rows of 512 tokens with 20 top logprobs: about 23 MB of events, far beyond the socket buffers (which took
      // about 3 MB on loopback here).
      const prompt = Array.from({ length: 16 }, (_, i) => `prompt number ${i}`);
      const body = JSON.stringify({ prompt, n: 4, max_tokens: 512, logprobs: 20, temperature: 1, seed: 2, stream: true });
      const before = server.batcher.stats.tokens;
      let received = 0;
      let client: Socket | undefined;
      const exchange = raw(server.port, (socket) => {
        client = socket;
        socket.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        // Reads the first bytes, then never again: the kernel's buffers fill, then the server's.
        socket.once('data', (d) => {
          received = d.length;
          socket.pause();
        });
      });
      const deadline = Date.now() + 60_000;
      while (!logs.some((l) => /not reading/.test(l)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(logs.filter((l) => /not reading/.test(l))).toEqual([expect.stringMatching(/^client is not reading its event stream: \d+ bytes unsent, over --max-stream-buffer 65536; closed it and cancelled its rows: POST \/v1\/completions$/)]);
      expect(received).toBeGreaterThan(0);
      client!.resume(); // a paused socket reports the close only once its data is read
      const { data } = await exchange; // the server closed the connection
      expect(data).not.toContain('data: [DONE]');
      while (server.batcher.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await server.batcher.idle();
      // Rows cancelled: far fewer than the 64 × 512 tokens asked for were generated.
      expect(server.batcher.stats.tokens - before).toBeLessThan(64 * 512 / 2);
      expect(logs.filter((l) => /internal error|event stream failed/.test(l))).toEqual([]);
      const after = await post(`${server.url}/v1/completions`, { prompt: 'Hello', max_tokens: 2, temperature: 0 });
      expect(after.status).toBe(200);
    } finally {
      await server.close();
    }
  }, 120_000);
});

describe('a streaming client that reads', () => {
  it('is never dropped for a burst one engine step sends at once (8 echoed prompts with 20 top logprobs)', async () => {
    const logs: string[] = [];
    const server = await serve(model, { outputPath: `${model.root}/out-burst`, maxStreamBufferBytes: 64 * 1024, maxResponseEntries: 1_000_000, log: (m) => logs.push(m) });
    try {
      const prompt = Array.from({ length: 8 }, (_, i) => `prompt ${i} ${'word '.repeat(300)}`);
      const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: 4, echo: true, logprobs: 20, temperature: 0, stream: true }),
      });
      const text = await res.text();
      // About 1.4 MB in the first step, far over the 64 KiB the client may leave unread.
      expect(text.length).toBeGreaterThan(1_000_000);
      expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(logs).toEqual([]);
    } finally {
      await server.close();
    }
  }, 120_000);
});

describe('connection cap', () => {
  it('closes connections beyond --max-connections as they arrive, and serves again once one is gone', async () => {
    const server = await serve(model, { outputPath: `${model.root}/out-cap`, maxConnections: 3 });
    const held: Socket[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const s = connect(server.port, '127.0.0.1');
        await new Promise((r) => s.once('connect', r));
        held.push(s);
      }
      const refused = await raw(server.port, (socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
      expect(refused.data).toBe('');
      held.pop()!.destroy();
      let status = 0;
      for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
        status = await get(`${server.url}/healthz`).then((r) => r.status, () => 0);
        if (status !== 200) await new Promise((r) => setTimeout(r, 100)); // the server notices the close asynchronously
      }
      expect(status).toBe(200);
    } finally {
      for (const s of held) s.destroy();
      await server.close();
    }
  });
});

describe('the official openai client', () => {
  let server: RunningServer;
  let client: OpenAI;
  beforeAll(async () => {
    server = await serve(model, { outputPath: `${model.root}/out-openai` });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'not-needed-on-loopback', maxRetries: 0 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('retrieves the served model by an id containing "/", and gets OpenAI’s 404 for another', async () => {
    const m = await client.models.retrieve(MODEL_NAME);
    expect(m).toMatchObject({ id: MODEL_NAME, object: 'model', owned_by: 'flexhelm' });
    expect(typeof m.created).toBe('number');
    const plain = await get(`${server.url}/v1/models/${MODEL_NAME}`);
    expect(plain.json).toEqual(m);
    const err = await client.models.retrieve('facebook/opt-66b').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ code: 'model_not_found', type: 'invalid_request_error' });
  });

  it('lists models and completes through the client', async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual([MODEL_NAME]);
    const c = await client.completions.create({ model: MODEL_NAME, prompt: 'Hello there', max_tokens: 4, temperature: 0 });
    expect(c.choices[0]!.text.length).toBeGreaterThan(0);
    expect(c.usage?.completion_tokens).toBe(4);
  });

  // Needs CompletionService.stream (the completions helper's half of issue 17 item 6); runs once both halves are merged.
  it.skipIf(typeof (CompletionService.prototype as { stream?: unknown }).stream !== 'function')('streams server-sent events the client reads, ending with finish_reason', async () => {
    const body = { model: MODEL_NAME, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 1 };
    const whole = await client.completions.create(body);
    const stream = await client.completions.create({ ...body, stream: true });
    let text = '';
    const chunks = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      text += chunk.choices.map((c) => c.text).join('');
    }
    expect(text).toBe(whole.choices[0]!.text);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    expect(chunks.slice(0, -1).every((c) => c.choices.every((ch) => ch.finish_reason === null))).toBe(true);
    expect(chunks.flatMap((c) => c.choices.flatMap((ch) => ch.logprobs?.tokens ?? []))).toEqual(whole.choices[0]!.logprobs!.tokens);
  });
});
