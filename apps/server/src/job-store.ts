import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '@flexhelm/atomic-write';
import type { JobRecord } from './job-record.js';

/** Job records as one JSON file each under `<dir>`, every write atomic (temp file + rename). */
export class JobStore {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  private path(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  save(job: JobRecord): void {
    writeFileAtomic(this.path(job.id), `${JSON.stringify(job, null, 2)}\n`);
  }

  /** Every readable record, oldest first; a corrupt file is reported and skipped, never fatal. */
  loadAll(onError: (file: string, err: Error) => void = () => {}): JobRecord[] {
    if (!existsSync(this.dir)) return [];
    const jobs: JobRecord[] = [];
    for (const f of readdirSync(this.dir)) {
      if (f.includes('.tmp-')) {
        rmSync(join(this.dir, f), { force: true }); // left by a crash mid-write: the previous record stands
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
