import { randomUUID } from 'node:crypto';
import { open, readFile, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

export interface FileLockOptions {
  /** A lock whose file was not touched for this long is taken as abandoned (its holder refreshes it 4× as often). */
  staleMs?: number;
  /** How often a waiting process looks again. */
  pollMs?: number;
  /** Called once when the lock is held by someone else and this process starts waiting. */
  onWait?: (holder: LockHolder | undefined) => void;
  signal?: AbortSignal;
}

/** What a lock file says about its holder. */
export interface LockHolder {
  pid: number;
  host: string;
  token: string;
  since: string;
}

/**
 * Runs `fn` while holding an exclusive lock file (created with O_EXCL, so only one process can win). A lock left by a
 * dead process on this host, or one not refreshed for `staleMs`, is broken and retaken.
 */
export async function withFileLock<T>(lockPath: string, fn: () => Promise<T>, options: FileLockOptions = {}): Promise<T> {
  const staleMs = options.staleMs ?? 30_000;
  const pollMs = options.pollMs ?? 100;
  const me: LockHolder = { pid: process.pid, host: hostname(), token: randomUUID(), since: new Date().toISOString() };
  let waited = false;
  for (;;) {
    options.signal?.throwIfAborted();
    if (await tryCreate(lockPath, me)) break;
    const holder = await readHolder(lockPath);
    if (await isStale(lockPath, holder, staleMs)) {
      // Re-read just before breaking it, so a lock that another waiter has just retaken is left alone.
      const again = await readHolder(lockPath);
      if (again?.token === holder?.token) await unlink(lockPath).catch(ignoreMissing);
      continue;
    }
    if (!waited) {
      waited = true;
      options.onWait?.(holder);
    }
    await sleep(pollMs, undefined, { signal: options.signal });
  }
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(lockPath, now, now).catch(() => undefined);
  }, Math.max(staleMs / 4, 10));
  heartbeat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(heartbeat);
    const holder = await readHolder(lockPath);
    if (holder?.token === me.token) await unlink(lockPath).catch(ignoreMissing);
  }
}

async function tryCreate(lockPath: string, me: LockHolder): Promise<boolean> {
  try {
    const handle = await open(lockPath, 'wx');
    try {
      await handle.writeFile(JSON.stringify(me));
    } finally {
      await handle.close();
    }
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

async function readHolder(lockPath: string): Promise<LockHolder | undefined> {
  try {
    const parsed = JSON.parse(await readFile(lockPath, 'utf8')) as Partial<LockHolder>;
    if (typeof parsed.pid === 'number' && typeof parsed.host === 'string' && typeof parsed.token === 'string') return parsed as LockHolder;
  } catch {
    // Missing, or still being written by its creator: judged by its age alone.
  }
  return undefined;
}

async function isStale(lockPath: string, holder: LockHolder | undefined, staleMs: number): Promise<boolean> {
  if (holder && holder.host === hostname() && !processAlive(holder.pid)) return true;
  try {
    const info = await stat(lockPath);
    return Date.now() - info.mtimeMs > staleMs;
  } catch (error) {
    ignoreMissing(error);
    return false; // gone already: the next attempt to create it decides
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function ignoreMissing(error: unknown): void {
  if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
}
