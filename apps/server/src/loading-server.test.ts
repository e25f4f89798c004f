import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startLoadingServer } from './loading-server.js';

describe('startLoadingServer', () => {
  it('answers /health 503 "loading" and every other request a 503 in OpenAI’s shape, then frees its port', async () => {
    const loading = await startLoadingServer('127.0.0.1', 0, 'org/model');
    const url = `http://127.0.0.1:${loading.port}`;
    try {
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({ status: 'loading', error: { code: 'model_loading', type: 'server_error' } });
      const other = await fetch(`${url}/v1/completions`, { method: 'POST', body: '{"prompt": "x"}' });
      expect(other.status).toBe(503);
      expect(other.headers.get('retry-after')).toBe('5');
      expect(((await other.json()) as { error: unknown }).error).toEqual({ message: 'the server is loading org/model; retry when GET /health answers 200', type: 'server_error', param: null, code: 'model_loading' });
    } finally {
      await loading.close();
    }
    // The real server takes the same port next.
    const again = await startLoadingServer('127.0.0.1', loading.port, 'org/model');
    await again.close();
  });

  it('answers a request sent on a connection opened before the handover (no reset), and drops a silent one after a grace', async () => {
    const loading = await startLoadingServer('127.0.0.1', 0, 'org/model');
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const socket = connect(loading.port, '127.0.0.1', () => resolve(socket));
        socket.once('error', reject);
      });
    const polling = await open();
    const silent = await open();
    const reply = new Promise<string>((resolve, reject) => {
      let text = '';
      polling.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      polling.on('end', () => resolve(text));
      polling.on('error', reject);
    });
    const silentEnded = new Promise<void>((resolve) => silent.on('close', () => resolve()));
    silent.on('error', () => {});
    const began = Date.now();
    const closed = loading.close();
    // The client's request arrives after close() began, on the connection it already had.
    polling.write('GET /health HTTP/1.1\r\nhost: x\r\n\r\n');
    expect(await reply).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n[\s\S]*"status":"loading"/);
    await silentEnded;
    await closed;
    expect(Date.now() - began).toBeLessThan(5000);
  });
});
