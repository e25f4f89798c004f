import { join } from 'node:path';
import { type ArchiveFormat, ensureFileDownloaded } from '@flexhelm/downloads';
import { joinInside, realPathInside } from './join-inside.js';
import type { ScenarioContext } from './scenario.js';

/** One source file of a download scenario. */
export interface SourceFile {
  /** The URL HELM 0.2.1 downloads. */
  url: string;
  /** Where HELM puts it, relative to the scenario's `output_path` (e.g. `data` for MMLU's unpacked `data.tar`). */
  path: string;
  unpack?: ArchiveFormat | 'auto';
  unpackedName?: string;
}

/**
 * The folder a scenario keeps its downloads in: HELM's `output_path`, or `<dataDir>/<scenario name>` when a shared
 * download cache is configured.
 */
export function scenarioSourceRoot(context: ScenarioContext, scenarioName: string): string {
  return context.dataDir ? join(context.dataDir, scenarioName) : context.outputPath;
}

/**
 * The URL to fetch: the original, or with `context.baseUrl` the same host and path below that base
 * (`https://host/a/b.csv` → `<baseUrl>/host/a/b.csv`), so one mirror or test server can stand in for every host.
 */
export function sourceUrl(context: ScenarioContext, url: string): string {
  if (!context.baseUrl) return url;
  const original = new URL(url);
  return `${context.baseUrl.replace(/\/+$/, '')}/${original.host}${original.pathname}${original.search}`;
}

/** HELM's `ensure_file_downloaded` for a scenario source: returns the local path of the file or unpacked folder. */
export async function downloadSource(context: ScenarioContext, scenarioName: string, source: SourceFile): Promise<string> {
  // `source.path` may hold a scenario argument (bbq's category): it must not lead out of the scenario's folder.
  const root = scenarioSourceRoot(context, scenarioName);
  const targetPath = joinInside(root, source.path);
  const url = sourceUrl(context, source.url);
  let lastReported = -1;
  const path = await ensureFileDownloaded({
    url,
    targetPath,
    unpack: source.unpack,
    unpackedName: source.unpackedName,
    offline: context.offline,
    signal: context.signal,
    onProgress: ({ phase, bytesDone, bytesTotal }) => {
      // A line per started 10%, not per chunk.
      const step = bytesTotal ? Math.floor((10 * bytesDone) / bytesTotal) : -1;
      if (step === lastReported || !context.log) return;
      lastReported = step;
      context.log(`${phase === 'download' ? 'Downloading' : 'Unpacking'} ${url} → ${targetPath}: ${bytesDone} bytes${bytesTotal ? ` of ${bytesTotal}` : ''}`);
    },
  });
  // A file or folder placed there by hand may be a link; what is read must still be inside.
  await realPathInside(root, path);
  return path;
}
