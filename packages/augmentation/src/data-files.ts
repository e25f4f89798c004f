import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { HelmError, pyJsonParse, type PyJsonValue } from '@flexhelm/core';

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
  /** How a missing file is fetched; default {@link downloadFile}. Pass @flexhelm/downloads' `ensureFileDownloaded` to share its cache. */
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

/** Minimal downloader: skips a file that exists, else fetches it and writes it atomically (temp file + rename). */
export async function downloadFile({ url, targetPath, offline }: FileRequest): Promise<void> {
  if (existsSync(targetPath)) return;
  if (offline) {
    throw new HelmError(
      'FileNotFoundError',
      `${targetPath} is missing and downloads are off (offline). Download ${url} to that path, or allow downloads.`,
    );
  }
  let response: Response;
  try {
    response = await fetch(url);
  } catch (err) {
    throw new HelmError('Exception', `Could not download ${url} (${(err as Error).message}). Without network, download it elsewhere and save it as ${targetPath}.`, { cause: err });
  }
  if (!response.ok) {
    throw new HelmError('Exception', `Downloading ${url} failed with HTTP ${response.status}. Save the file as ${targetPath} by hand if the source moved.`);
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  await mkdir(dirname(targetPath), { recursive: true });
  const temp = `${targetPath}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(temp, bytes);
    await rename(temp, targetPath);
  } finally {
    await rm(temp, { force: true });
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
