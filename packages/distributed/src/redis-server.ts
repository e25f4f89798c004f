import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { join } from 'node:path';

export interface LocalRedisOptions {
  /** Folder for the AOF files, pid file and log. */
  dir: string;
  /** Default: a free port chosen by the OS. */
  port?: number;
  /** AOF with fsync every second (default true): a restart keeps the queue and results, losing at most ~1 s of writes. */
  appendOnly?: boolean;
  password?: string;
  /** Default `redis-server` on PATH. */
  binary?: string;
}

/** A free TCP port on 127.0.0.1 (the OS picks it; there is a small window before the caller binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write('PING\r\n'));
    socket.setTimeout(500, () => socket.destroy());
    socket.once('data', (d) => {
      // +PONG, or -NOAUTH when a password is set: either way it is serving.
      resolve(/^\+PONG|^-NOAUTH/.test(d.toString()));
      socket.destroy();
    });
    socket.once('error', () => resolve(false));
    socket.once('close', () => resolve(false));
  });
}

/**
 * A `redis-server` on 127.0.0.1 for local use, tests and benchmarks: bound to loopback only, AOF everysec,
 * `noeviction` (a queue must never lose keys to memory pressure). `stop()` ends it by its pid; `kill()` simulates a crash.
 */
export class LocalRedis {
  private constructor(
    readonly options: Required<Omit<LocalRedisOptions, 'password'>> & { password?: string },
    private child: ChildProcess,
  ) {}

  get port(): number {
    return this.options.port;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get url(): string {
    return `redis://${this.options.password ? `:${encodeURIComponent(this.options.password)}@` : ''}127.0.0.1:${this.options.port}/0`;
  }

  static async start(options: LocalRedisOptions): Promise<LocalRedis> {
    const binary = options.binary ?? 'redis-server';
    const probe = spawnSync(binary, ['--version'], { encoding: 'utf8' });
    if (probe.error || probe.status !== 0) {
      throw new Error(`cannot run ${binary} (${probe.error?.message ?? probe.stderr}): install Redis ≥ 6.2, e.g. \`apt-get install -y redis-server\`, or pass its path`);
    }
    mkdirSync(options.dir, { recursive: true });
    const full = { dir: options.dir, port: options.port ?? (await freePort()), appendOnly: options.appendOnly ?? true, binary, password: options.password };
    const redis = new LocalRedis(full, LocalRedis.spawn(full));
    await redis.waitReady();
    return redis;
  }

  private static spawn(o: LocalRedis['options']): ChildProcess {
    const args = [
      '--port', String(o.port), '--bind', '127.0.0.1', '--dir', o.dir, '--save', '',
      '--appendonly', o.appendOnly ? 'yes' : 'no', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction',
      '--logfile', join(o.dir, 'redis.log'), '--daemonize', 'no',
    ];
    if (o.password) args.push('--requirepass', o.password);
    const child = spawn(o.binary, args, { stdio: 'ignore' });
    child.on('error', () => undefined);
    return child;
  }

  private async waitReady(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) break;
      if (await ping(this.options.port)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    const log = existsSync(join(this.options.dir, 'redis.log')) ? readFileSync(join(this.options.dir, 'redis.log'), 'utf8').split('\n').slice(-5).join('\n') : '';
    throw new Error(`redis-server on port ${this.options.port} did not start within ${timeoutMs} ms${log ? `; its log ends:\n${log}` : ''}`);
  }

  private exited(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => this.child.once('exit', () => resolve()));
  }

  /** Simulates a crash (SIGKILL): whatever AOF had not fsynced is lost. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited();
  }

  /** Starts the server again on the same port and folder (it replays the AOF). */
  async restart(): Promise<void> {
    await this.exited();
    this.child = LocalRedis.spawn(this.options);
    await this.waitReady();
  }

  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    await this.exited();
  }
}
