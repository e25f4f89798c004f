import { getPriority, setPriority } from 'node:os';

/** The nice value (at least) of the server's helper threads (text workers, the suite summarizer): below the event loop's. */
export const BACKGROUND_NICE = 10;

/**
 * Lowers the calling worker thread's scheduling priority, so that on a machine with fewer cores than busy threads the
 * event loop (health checks, small requests, cancels) runs first and the bulk work (tokenizing long prompts,
 * summarizing a suite) takes what is left. On Linux a nice value belongs to a thread, not the process:
 * `setpriority(PRIO_PROCESS, 0)` — `os.setPriority(n)` — changes only the thread that calls it. Elsewhere it would
 * change the whole process, so it is done on Linux only; a refusal (a sandbox without the syscall) changes nothing.
 */
export function lowerThisThreadPriority(): void {
  if (process.platform !== 'linux') return;
  try {
    // Only ever lower: a server started under `nice 15` keeps its helper threads there.
    setPriority(Math.max(getPriority(), BACKGROUND_NICE));
  } catch {
    // Scheduling priority is an optimisation: the work is the same at any priority.
  }
}
