import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { isTempName, writeFileAtomic, writeFileAtomicAsync } from '@flexhelm/atomic-write';
import type { JobRecord } from './job-record.js';

interface Pending {
  job: JobRecord;
  dirty: boolean;
  urgent: boolean;
  writing?: Promise<void>;
  timer?: NodeJS.Timeout;
  lastWrite: number;
}

export interface JobStoreOptions {
  /** Least time between two writes of one record while it only progresses (default 1000 ms). */
  intervalMs?: number;
  /** A write that failed (full or read-only disk); the record stays in memory and the next change writes it again. */
  onError?: (id: string, err: Error) => void;
}

/**
 * Job records as one compact JSON file each under `<dir>`, every write all or nothing (`@flexhelm/atomic-write`).
 * A changing job costs its caller O(1): `save` marks the record dirty and one asynchronous write (off the event loop,
 * at most one in flight per job, at most one per `intervalMs` unless urgent) takes the latest state.
 */
export class JobStore {
  private readonly pending = new Map<string, Pending>();
  private readonly intervalMs: number;

  constructor(
    readonly dir: string,
    private readonly options: JobStoreOptions = {},
  ) {
    mkdirSync(dir, { recursive: true });
    this.intervalMs = options.intervalMs ?? 1000;
  }

  private path(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  /** Writes the record now, before returning (a new job is on disk before the client hears of it). */
  saveNow(job: JobRecord): void {
    writeFileAtomic(this.path(job.id), `${JSON.stringify(job)}\n`);
  }

  /** Schedules a write of the record's latest state; `urgent` (a status change) skips the interval. */
  save(job: JobRecord, urgent = false): void {
    // Entries stay (one small object per job) so that the interval holds across writes.
    let p = this.pending.get(job.id);
    if (!p) {
      p = { job, dirty: false, urgent: false, lastWrite: 0 };
      this.pending.set(job.id, p);
    }
    p.job = job;
    p.dirty = true;
    p.urgent ||= urgent;
    this.schedule(p);
  }

  private schedule(p: Pending): void {
    if (p.writing || !p.dirty) return;
    const wait = p.urgent ? 0 : Math.max(0, p.lastWrite + this.intervalMs - Date.now());
    if (p.timer) {
      if (wait > 0) return;
      clearTimeout(p.timer);
    }
    p.timer = setTimeout(() => this.write(p), wait);
  }

  private write(p: Pending): void {
    clearTimeout(p.timer);
    p.timer = undefined;
    p.dirty = false;
    p.urgent = false;
    const { id } = p.job;
    const text = `${JSON.stringify(p.job)}\n`; // the state as of now; later changes make the next write
    let failed = false;
    p.writing = writeFileAtomicAsync(this.path(id), text)
      .catch((err: Error) => {
        // Not on disk: the next change (or a flush) tries again; no retry loop against a full disk.
        failed = true;
        p.dirty = true;
        this.options.onError?.(id, err);
      })
      .finally(() => {
        p.writing = undefined;
        p.lastWrite = Date.now();
        if (!failed) this.schedule(p);
      });
  }

  /** Writes the record's unsaved changes now (once) and waits until they are on disk or failed. */
  async settled(id: string): Promise<void> {
    const p = this.pending.get(id);
    if (!p) return;
    await p.writing;
    if (p.dirty) {
      this.write(p);
      await p.writing;
    }
  }

  /** Writes every record with unsaved changes now and waits for all writes (server stop). */
  async flush(): Promise<void> {
    for (const id of this.pending.keys()) await this.settled(id);
  }

  /** Every readable record, oldest first; a corrupt file is reported and skipped, never fatal. */
  loadAll(onError: (file: string, err: Error) => void = () => {}): JobRecord[] {
    if (!existsSync(this.dir)) return [];
    const jobs: JobRecord[] = [];
    for (const f of readdirSync(this.dir)) {
      // Left by a crash mid-write (older versions named them `<id>.json.tmp-…`): the previous record stands.
      if (isTempName(f) || f.includes('.tmp-')) {
        rmSync(join(this.dir, f), { force: true });
        continue;
      }
      if (!f.endsWith('.json')) continue;
      try {
        jobs.push(JSON.parse(readFileSync(join(this.dir, f), 'utf8')) as JobRecord);
      } catch (err) {
        onError(f, err as Error);
      }
    }
    return jobs.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }
}
