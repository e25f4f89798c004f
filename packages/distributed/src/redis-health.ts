import type { Redis } from 'ioredis';

/** Redis went away and did not come back in time (or refused the connection): the message says why, in one line. */
export class QueueUnavailableError extends Error {
  override name = 'QueueUnavailableError';
}

const CONNECTION_ERROR = /Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|NOAUTH|WRONGPASS|Stream isn't writeable|MaxRetriesPerRequest/;

/** Whether `err` is Redis being unreachable (refused, reset, closed, unauthenticated) rather than a bug or bad data. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string } | null;
  return e?.name === 'ConnectionClosedError' || CONNECTION_ERROR.test(`${e?.code ?? ''} ${e?.message ?? ''}`);
}

export type RedisHealthEvent = { type: 'down'; error: string } | { type: 'up'; downMs: number };

/**
 * Follows one ioredis client: reports when its connection drops (once per outage, not once per reconnection attempt)
 * and comes back, and rejects `lost` once it has been down `timeoutMs` in a row. ioredis keeps reconnecting meanwhile
 * and commands wait (`maxRetriesPerRequest: null`), so callers race their work against `lost`.
 */
export class RedisHealth {
  readonly lost: Promise<never>;
  private fail!: (err: Error) => void;
  private downSince: number | undefined;
  private lastError = 'connection closed';
  private timer: NodeJS.Timeout | undefined;
  private disposed = false;
  private readonly onError = (err: Error) => {
    this.down();
    this.lastError = (err as NodeJS.ErrnoException).code ?? err.message;
    this.report();
  };
  /** Whether this outage was reported (the first reconnection's error says why better than 'connection closed'). */
  private reported = false;
  private reportTimer: NodeJS.Timeout | undefined;
  private readonly onClose = () => {
    if (this.downSince === undefined) this.lastError = 'connection closed';
    this.down();
  };
  private readonly onReady = () => {
    this.wasReady = true;
    this.up();
  };
  /** Before the first connection, failures are the caller's to report (connect() rejects). */
  private wasReady = false;

  constructor(
    private readonly client: Redis,
    readonly timeoutMs: number,
    private readonly onEvent: (e: RedisHealthEvent) => void = () => {},
  ) {
    this.lost = new Promise<never>((_, reject) => {
      this.fail = reject;
    });
    this.lost.catch(() => undefined); // raced by the callers; never an unhandled rejection
    client.on('error', this.onError).on('close', this.onClose).on('ready', this.onReady);
  }

  /** How long the connection has been down (0 while up). */
  get downMs(): number {
    return this.downSince === undefined ? 0 : Date.now() - this.downSince;
  }

  /** Why it is down, e.g. `ECONNREFUSED`. */
  get error(): string {
    return this.lastError;
  }

  /** `err` (a failed command or connect) as a QueueUnavailableError naming the socket's error when there was one. */
  unavailable(err: unknown): QueueUnavailableError {
    const cause = this.lastError !== 'connection closed' ? this.lastError : (err as Error).message;
    return new QueueUnavailableError(`cannot reach Redis (${cause})`);
  }

  private report(): void {
    if (this.disposed || this.downSince === undefined || this.reported || !this.wasReady) return;
    this.reported = true;
    clearTimeout(this.reportTimer);
    this.onEvent({ type: 'down', error: this.lastError });
  }

  private down(): void {
    if (this.disposed || this.downSince !== undefined) return;
    this.downSince = Date.now();
    this.reported = false;
    this.lastError = 'connection closed';
    this.reportTimer = setTimeout(() => this.report(), 1000);
    this.reportTimer.unref();
    this.timer = setTimeout(() => {
      this.fail(new QueueUnavailableError(`lost the connection to Redis (${this.lastError}) and it did not come back within ${Math.round(this.timeoutMs / 1000)} s`));
    }, this.timeoutMs);
    this.timer.unref();
  }

  private up(): void {
    if (this.disposed || this.downSince === undefined) return;
    const downMs = Date.now() - this.downSince;
    this.downSince = undefined;
    clearTimeout(this.timer);
    clearTimeout(this.reportTimer);
    if (this.reported) this.onEvent({ type: 'up', downMs });
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.timer);
    clearTimeout(this.reportTimer);
    this.client.off('error', this.onError).off('close', this.onClose).off('ready', this.onReady);
  }
}

/** Awaits `close()` at most `ms` (closing a client while Redis is down can wait for a reconnection that never comes). */
export async function closeWithin(close: () => Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([
    close().then(() => true, () => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return done;
}
