import { describe, expect, it } from 'vitest';
import { parseRedisUrl, redactRedisUrl } from './redis-url.js';

describe('parseRedisUrl', () => {
  it('reads host, port, db, credentials and TLS', () => {
    expect(parseRedisUrl('redis://127.0.0.1:6390/2', {})).toEqual({ host: '127.0.0.1', port: 6390, db: 2, username: undefined, password: undefined, tls: undefined, maxRetriesPerRequest: null });
    const c = parseRedisUrl('rediss://flex:s%40cret@redis.example.org/0', {});
    expect(c).toMatchObject({ host: 'redis.example.org', port: 6379, db: 0, username: 'flex', password: 's@cret', tls: { servername: 'redis.example.org' } });
    expect(parseRedisUrl('redis://h:1', { REDIS_PASSWORD: 'pw' }).password).toBe('pw');
  });

  it('rejects what is not a Redis URL, saying what to write', () => {
    expect(() => parseRedisUrl('localhost:6379', {})).toThrow(/scheme 'localhost:'.*redis:\/\//);
    expect(() => parseRedisUrl('http://h:1', {})).toThrow(/scheme 'http:'/);
    expect(() => parseRedisUrl('redis://h:1/x', {})).toThrow(/database 'x'/);
    expect(() => parseRedisUrl('redis://h:1/99', {})).toThrow(/0–15/);
    expect(() => parseRedisUrl('not a url', {})).toThrow(/not a URL/);
  });

  it('never shows a password in messages', () => {
    expect(redactRedisUrl('redis://u:secret@h:1/0')).toBe('redis://u:***@h:1/0');
    expect(() => parseRedisUrl('redis://u:secret@h:1/x', {})).toThrow(/u:\*\*\*@/);
  });
});
