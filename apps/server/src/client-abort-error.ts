/**
 * A completion request whose client went away (its AbortSignal fired): its rows that had not started were dropped.
 * Named `AbortError` like the platform's abort errors, so routes can log it as one info line instead of a failure.
 */
export class ClientAbortError extends Error {
  constructor(reason?: unknown) {
    super(reason instanceof Error ? reason.message : reason === undefined ? 'the client went away' : String(reason));
    this.name = 'AbortError';
  }
}

/** True for an abort caused by the client (or any `AbortError`), which is not a server failure. */
export function isClientAbort(err: unknown): boolean {
  return err instanceof ClientAbortError || (err instanceof Error && err.name === 'AbortError');
}
