/** What `exitOnInterrupt` installs: `interrupted` tells the command to stay quiet about the errors that follow. */
export interface InterruptGuard {
  readonly interrupted: boolean;
  dispose(): void;
}

const EXIT_STATUS = { SIGINT: 130, SIGTERM: 143 } as const;

/**
 * On Ctrl-C (or SIGTERM): prints `message` as one line, runs `cleanup` (closing the cache and the engine; at most
 * `graceMs`, since a batch in flight may hold the engine), then exits with 128 + the signal number. A second signal
 * exits at once. Nothing is left half-written: the cache commits whole batches and the run files are written
 * atomically by synchronous code that a signal handler cannot interrupt. `beforeMessage` ends what is on the line (a
 * progress bar being redrawn) so that the message starts on its own line.
 */
export function exitOnInterrupt(stderr: NodeJS.WritableStream, message: string, cleanup: () => Promise<void>, o: { beforeMessage?: () => void; graceMs?: number } = {}): InterruptGuard {
  const graceMs = o.graceMs ?? 10_000;
  let interrupted = false;
  const handler = (signal: keyof typeof EXIT_STATUS) => {
    const status = EXIT_STATUS[signal];
    if (interrupted) process.exit(status);
    interrupted = true;
    o.beforeMessage?.();
    stderr.write(`${message}\n`);
    const grace = new Promise<void>((done) => setTimeout(done, graceMs).unref());
    void Promise.race([cleanup().catch(() => undefined), grace]).finally(() => process.exit(status));
  };
  const onInt = () => handler('SIGINT');
  const onTerm = () => handler('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return {
    get interrupted() {
      return interrupted;
    },
    dispose() {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    },
  };
}
