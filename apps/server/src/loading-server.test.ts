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
});
