import type { CommandContext, OptionSpec } from './command.js';
import { UsageError } from './usage-error.js';

/**
 * The option `run`, `instances` and `prompts` share for fetching scenario source files from a mirror, laid out as
 * `URL/<host>/<path>` (tests serve one on loopback). `--base-url` is its older name in `instances` and `prompts`.
 */
export const DATA_MIRROR_OPTIONS: Record<'data-mirror' | 'base-url', OptionSpec> = {
  'data-mirror': { type: 'string', valueName: 'URL', description: 'fetch scenario source files from a mirror laid out as URL/<host>/<path> instead of their hosts' },
  'base-url': { type: 'string', valueName: 'URL', description: 'the older name of --data-mirror (same meaning)' },
};

/** The mirror URL given by either name, checked; undefined when neither is given. */
export function dataMirrorOption(options: CommandContext['options']): string | undefined {
  const mirror = options['data-mirror'] as string | undefined;
  const base = options['base-url'] as string | undefined;
  if (mirror !== undefined && base !== undefined && mirror !== base) {
    throw new UsageError(`--base-url is the older name of --data-mirror; give one of them (got '${mirror}' and '${base}')`);
  }
  const url = mirror ?? base;
  if (url === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) throw new UsageError(`--data-mirror must be an http:// or https:// URL, got '${url}'`);
  return url;
}
