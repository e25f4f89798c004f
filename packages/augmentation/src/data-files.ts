import { pyJsonParse, type PyJsonValue } from '@flexhelm/python-compat';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { DownloadError, ensureFileDownloaded } from '@flexhelm/downloads';
import { HelmError } from '@flexhelm/core';

/** "Make sure `targetPath` holds the file at `url`": the shape of `ensureFileDownloaded` in @flexhelm/downloads. */
export interface FileRequest {
  url: string;
  targetPath: string;
  offline?: boolean;
}
export type EnsureFile = (request: FileRequest) => Promise<void>;

/** Where perturbations find the word lists and mapping files they need. */
export interface DataOptions {
  /** Folder that HELM's relative paths (`benchmark_output/perturbations/...`) are resolved against; default the cwd. */
  baseDir?: string;
  /** How a missing file is fetched; default {@link downloadFile} (@flexhelm/downloads). */
  ensureFile?: EnsureFile;
  /** Never download: a missing file is an error telling where to put it. */
  offline?: boolean;
  /**
   * A HELM v0.2.1 checkout (or a folder holding its `augmentations/` files) to read HELM's own word lists from
   * instead of downloading them; default the `FLEXHELM_HELM_SOURCE_DIR` environment variable.
   */
  helmSourceDir?: string;
}

/** `path` resolved the way HELM resolves its relative paths: against the working folder (here `baseDir`). */
export function resolveDataPath(path: string, options: DataOptions = {}): string {
  return isAbsolute(path) ? path : resolve(options.baseDir ?? process.cwd(), path);
}

/**
 * Makes sure the file exists at `targetPath` (resolved against `baseDir`), fetching it through `options.ensureFile`
 * when it does not. Returns the absolute path.
 */
export async function ensureDataFile(url: string, targetPath: string, options: DataOptions = {}): Promise<string> {
  const absolute = resolveDataPath(targetPath, options);
  if (existsSync(absolute)) return absolute;
  const ensure = options.ensureFile ?? downloadFile;
  await ensure({ url, targetPath: absolute, offline: options.offline });
  if (!existsSync(absolute)) {
    throw new HelmError('FileNotFoundError', `${absolute} is still missing after fetching ${url}; check the download function passed as ensureFile.`);
  }
  return absolute;
}

/**
 * The default fetcher: @flexhelm/downloads (atomic, resumable, locked against concurrent processes, offline-aware),
 * with its errors turned into HelmErrors of the class HELM would raise (a missing file offline: FileNotFoundError).
 */
export async function downloadFile({ url, targetPath, offline }: FileRequest): Promise<void> {
  try {
    await ensureFileDownloaded({ url, targetPath, offline: offline || undefined });
  } catch (err) {
    if (err instanceof DownloadError) {
      const hint = err.failure === 'offline' ? ' (downloads are off: offline)' : `. Save the file as ${targetPath} by hand if the source moved or this machine has no network.`;
      throw new HelmError(err.failure === 'offline' ? 'FileNotFoundError' : 'Exception', `${err.message}${hint}`, { cause: err });
    }
    throw err;
  }
}

/** Reads a JSON file the way Python's `json.load` sees it (key order kept, ints vs floats), or fails naming `what`. */
export async function readJsonFile(path: string, what: string): Promise<PyJsonValue> {
  try {
    return pyJsonParse(await readFile(path, 'utf8'));
  } catch (err) {
    throw new HelmError('ValueError', `Cannot read ${what} ${path}: ${(err as Error).message}`, { cause: err });
  }
}
