import { pyJsonDumps, pyJsonParse } from '@flexhelm/python-compat';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'libsql';
import { helmJson, requestResultFromPy, requestResultToPy, type Request, type RequestResult } from '@flexhelm/core';

/** One cached completion: which model produced it, for which request. */
export interface CacheEntry {
  modelId: string;
  request: Request;
  result: RequestResult;
}

const SCHEMA_VERSION = 1;

/**
 * The key of a request: sha256 over the model's identity and the full request as Python's `json.dumps` writes it
 * (field order fixed, ints and floats kept apart), so two requests share a key exactly when HELM would consider
 * them the same request to the same model.
 */
export function requestKey(modelId: string, request: Request): string {
  return createHash('sha256').update(modelId).update('\n').update(pyJsonDumps(request as never)).digest('hex');
}

/** A request cache file that cannot be created or read: the user's to fix (the message says how), not a crash. */
export class RequestCacheError extends Error {
  constructor(readonly path: string, message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'RequestCacheError';
  }
}

/**
 * A crash-safe on-disk cache of completed requests in one SQLite file (WAL journal). Each `putMany` is one
 * transaction: after a kill -9 the file holds every batch that was committed and nothing of the one in flight.
 */
export class RequestCache {
  private readonly db: Database.Database;
  private readonly getStmt: Database.Statement<[string]>;
  private readonly putStmt: Database.Statement<[string, string, string, string, number]>;

  private constructor(readonly path: string, db: Database.Database) {
    this.db = db;
    this.getStmt = db.prepare('SELECT result FROM requests WHERE key = ?');
    this.putStmt = db.prepare(
      'INSERT INTO requests (key, model_id, request, result, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING',
    );
  }

  /**
   * Opens (creating if needed) the cache at `path`; `:memory:` gives a throwaway cache. A file that cannot be
   * created, is not SQLite, is truncated or is from another version is a `RequestCacheError` naming the file; the
   * file itself is left as it was.
   */
  static open(path: string): RequestCache {
    if (path !== ':memory:') {
      try {
        mkdirSync(dirname(path), { recursive: true });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        throw new RequestCacheError(path, `cannot create the request cache ${path} (${code}): give a --cache-path (or --output-path) in a writable folder`, err);
      }
    }
    let db: Database.Database | undefined;
    try {
      db = new Database(path);
      // A damaged file must fail now, not wait on a lock that a stale -shm file claims.
      db.pragma('busy_timeout = 10000');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.exec(`CREATE TABLE IF NOT EXISTS requests (
        key TEXT PRIMARY KEY,
        model_id TEXT NOT NULL,
        request TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at INTEGER NOT NULL
      )`);
      db.exec('CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)');
      const version = db.prepare("SELECT value FROM meta WHERE name = 'schema_version'").get() as { value: string } | undefined;
      if (version === undefined) db.prepare("INSERT INTO meta VALUES ('schema_version', ?)").run(String(SCHEMA_VERSION));
      else if (Number(version.value) !== SCHEMA_VERSION) {
        throw new Error(`it has schema version ${version.value}, this flexhelm reads version ${SCHEMA_VERSION}`);
      }
      // Walks every page of the table: a truncated file fails here rather than in the middle of a run.
      db.prepare('SELECT count(*) FROM requests').get();
    } catch (err) {
      if (db?.open) db.close();
      throw new RequestCacheError(
        path,
        `cannot use the request cache ${path}: ${(err as Error).message}. ` +
          'If the file is damaged or from another version, move it away (the run then recomputes its requests) or pass another --cache-path.',
        err,
      );
    }
    return new RequestCache(path, db);
  }

  /** The cached result of `request` on `modelId`, marked `cached: true`, or undefined. */
  get(modelId: string, request: Request): RequestResult | undefined {
    const row = this.getStmt.get(requestKey(modelId, request)) as { result: string } | undefined;
    if (!row) return undefined;
    return { ...requestResultFromPy(pyJsonParse(row.result), 'cached result'), cached: true };
  }

  /** Stores a batch of results atomically. A request already cached keeps its first result (idempotent writes). */
  putMany(entries: readonly CacheEntry[]): void {
    const now = Date.now();
    // By hand rather than `db.transaction`: on a full disk SQLite has already rolled back when the insert fails, and
    // the wrapper's own ROLLBACK then fails ("no transaction is active"), hiding the cause.
    this.db.exec('BEGIN');
    try {
      for (const e of entries) {
        this.putStmt.run(requestKey(e.modelId, e.request), e.modelId, helmJson(e.request), pyJsonDumps(requestResultToPy(e.result)), now);
      }
      this.db.exec('COMMIT');
    } catch (err) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      const code = (err as { code?: unknown }).code;
      if (code === 'SQLITE_FULL' || /database or disk is full/.test((err as Error).message)) {
        throw new RequestCacheError(
          this.path,
          `cannot write the request cache ${this.path}: the folder ${dirname(this.path)} is full (SQLITE_FULL); free space there or give a --cache-path in another folder. The requests cached before are kept.`,
          err,
        );
      }
      throw err;
    }
  }

  put(modelId: string, request: Request, result: RequestResult): void {
    this.putMany([{ modelId, request, result }]);
  }

  /** Number of cached results, for one model or for all. */
  count(modelId?: string): number {
    const row = (modelId === undefined
      ? this.db.prepare('SELECT count(*) AS n FROM requests').get()
      : this.db.prepare('SELECT count(*) AS n FROM requests WHERE model_id = ?').get(modelId)) as { n: number };
    return Number(row.n);
  }

  close(): void {
    if (!this.db.open) return;
    try {
      // Folds the WAL into the file, so that a cache closed cleanly is one self-contained file (to copy or move away).
      // PASSIVE never waits: pages another process still reads stay in the WAL, which is just as correct.
      this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // A checkpoint is an optimisation; the WAL keeps every committed batch either way.
    }
    this.db.close();
  }
}
