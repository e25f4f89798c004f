/**
 * Profiling this machine for `--percent auto` could not set up or run its small engines at the model's shapes. The
 * message is one line naming the shape and the cause and says how to go on without profiling; front ends report it
 * as a user-facing error, not a crash.
 */
export class ProfilingError extends Error {
  override name = 'ProfilingError';
}

/** `err` as a `ProfilingError` for profiling `what` (kept when it already is one). */
export function profilingError(what: string, err: unknown): ProfilingError {
  if (err instanceof ProfilingError) return err;
  const cause = (err instanceof Error ? err.message : String(err)).split('\n')[0];
  return new ProfilingError(`profiling ${what} for --percent auto failed: ${cause}. Give the policy explicitly instead (e.g. --percent 0 0 100 0 100 0 keeps the weights on disk)`);
}
