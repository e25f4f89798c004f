import { AtomicWriteError } from '@flexhelm/atomic-write';

/**
 * The message for a full disk (ENOSPC, also EDQUOT: a quota), or undefined for any other error. A run's own files
 * (HELM's five, written all or nothing) name the folder that is full; anything else full is the offload directory,
 * whose files are scratch data that the engine removes when it stops, so the fix is space or a smaller disk share.
 */
export function diskFullMessage(err: unknown, offloadDir: string): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return undefined;
  if (err instanceof AtomicWriteError) {
    return `${err.message}. No file was left half-written; the request cache keeps every completed request, so a rerun computes nothing again.`;
  }
  const path = (err as { path?: unknown }).path;
  return (
    `the offload directory ${offloadDir} is full (${code}${typeof path === 'string' ? ` writing ${path}` : ''}): ` +
    'free space there, give another --offload-dir, or put less on disk with --percent (its two disk shares are ' +
    '100 - WG - WC for weights and 100 - CG - CC for the KV cache). Nothing was written to the run directories; ' +
    'the request cache keeps every completed request.'
  );
}
