/** Connection settings for ioredis/BullMQ, parsed from a `redis://` or `rediss://` (TLS) URL. */
export interface RedisConnection {
  host: string;
  port: number;
  db: number;
  username?: string;
  password?: string;
  /** Present for `rediss://`: TLS with the system's CA store (set NODE_EXTRA_CA_CERTS for a private CA). */
  tls?: { servername?: string };
  /** BullMQ workers block on Redis; they must retry forever rather than fail a command after N reconnects. */
  maxRetriesPerRequest: null;
}

export class RedisUrlError extends Error {
  override name = 'RedisUrlError';
}

const USAGE = 'expected redis://[USER:PASSWORD@]HOST:PORT[/DB] (or rediss:// for TLS), e.g. redis://127.0.0.1:6379/0';

/** Parses `redis://[user:password@]host[:port][/db]`; `rediss://` turns TLS on. The password may also come from REDIS_PASSWORD. */
export function parseRedisUrl(url: string, env: NodeJS.ProcessEnv = process.env): RedisConnection {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RedisUrlError(`--queue '${url}' is not a URL: ${USAGE}`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new RedisUrlError(`--queue '${redactRedisUrl(url)}' has scheme '${parsed.protocol}': ${USAGE}`);
  }
  if (parsed.hostname === '') throw new RedisUrlError(`--queue '${redactRedisUrl(url)}' has no host: ${USAGE}`);
  const port = parsed.port === '' ? 6379 : Number(parsed.port);
  const dbText = parsed.pathname.replace(/^\//, '');
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0 || db > 15 || !/^\d*$/.test(dbText)) {
    throw new RedisUrlError(`--queue '${redactRedisUrl(url)}' names database '${dbText}': use a number 0–15 after the port`);
  }
  const password = parsed.password !== '' ? decodeURIComponent(parsed.password) : env.REDIS_PASSWORD || undefined;
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port,
    db,
    username: parsed.username !== '' ? decodeURIComponent(parsed.username) : undefined,
    password,
    tls: parsed.protocol === 'rediss:' ? { servername: parsed.hostname } : undefined,
    maxRetriesPerRequest: null,
  };
}

/** The URL with its password replaced by `***`, for messages and logs. */
export function redactRedisUrl(url: string): string {
  return url.replace(/^(rediss?:\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}
