import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureFileDownloaded } from '@flexhelm/downloads';
import { parseBiasWordLists, type BiasWordLists } from '@flexhelm/metrics';
export type { BiasWordLists };

/** Where HELM 0.2.1 keeps the word lists its BiasMetric counts (flexhelm does not ship a copy of HELM's source). */
export const BIAS_WORD_LISTS_URL = 'https://raw.githubusercontent.com/stanford-crfm/helm/v0.2.1/src/helm/benchmark/metrics/bias_word_lists.py';

/**
 * HELM's bias word lists for BiasMetric: from a HELM v0.2.1 checkout (`FLEXHELM_HELM_SOURCE_DIR`), from the data
 * folder, or downloaded once into it. Returns the reason instead when they cannot be had (offline, no network), so
 * the run goes on and reports BiasMetric as not computed.
 */
export async function loadBiasWordLists(options: { dataDir: string; offline?: boolean; env?: NodeJS.ProcessEnv }): Promise<BiasWordLists | { unavailable: string }> {
  const env = options.env ?? process.env;
  const source = env.FLEXHELM_HELM_SOURCE_DIR;
  const candidates = source ? [join(source, 'src/helm/benchmark/metrics/bias_word_lists.py'), join(source, 'metrics/bias_word_lists.py')] : [];
  const target = join(options.dataDir, 'helm-v0.2.1', 'bias_word_lists.py');
  try {
    let path = candidates.find((p) => existsSync(p));
    // Optional data: one quick attempt, so a machine without network is not held up.
    if (!path) path = await ensureFileDownloaded({ url: BIAS_WORD_LISTS_URL, targetPath: target, offline: options.offline || undefined, maxAttempts: 1 });
    return parseBiasWordLists(readFileSync(path, 'utf8'));
  } catch (err) {
    return { unavailable: `HELM's bias word lists are not available (${(err as Error).message.split('\n')[0]})` };
  }
}
