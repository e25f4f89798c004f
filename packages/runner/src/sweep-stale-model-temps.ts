import { type Dirent, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** Whether process `pid` exists on this machine (EPERM: it exists but belongs to someone else). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes `<dataDir>/models/<name>.tmp-<PID>/` folders that a killed model maker left behind (`makeModel` writes
 * beside the final folder, then renames). Only folders whose PID is no longer running go: a live process, this one
 * included, may still be writing its own. Returns the folders removed.
 */
export function sweepStaleModelTemps(dataDir: string): string[] {
  const models = join(dataDir, 'models');
  let entries: Dirent[];
  try {
    entries = readdirSync(models, { withFileTypes: true });
  } catch {
    return []; // no models folder yet (or unreadable: resolving the model reports that)
  }
  const removed: string[] = [];
  for (const entry of entries) {
    const match = /\.tmp-(\d+)$/.exec(entry.name);
    if (!match || !entry.isDirectory()) continue;
    const pid = Number(match[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || isAlive(pid)) continue;
    const folder = join(models, entry.name);
    try {
      rmSync(folder, { recursive: true, force: true });
      removed.push(folder);
    } catch {
      // A folder that cannot be removed now (read-only mount) stays for a later start; it blocks nothing.
    }
  }
  return removed;
}
