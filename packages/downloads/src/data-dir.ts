import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';

/** Where {@link resolveDataDir} looks. */
export interface DataDirOptions {
  /** An explicit folder, e.g. from the CLI's `--data-dir`; wins over everything else. */
  dataDir?: string;
  /** The environment to read (`process.env` when omitted). */
  env?: NodeJS.ProcessEnv;
}

/**
 * The folder flexhelm keeps downloaded data in: `dataDir` if given, else `$FLEXHELM_DATA_DIR`, else
 * `$XDG_CACHE_HOME/flexhelm`, else `~/.cache/flexhelm`. Always an absolute path; the folder is not created here.
 */
export function resolveDataDir(options: DataDirOptions = {}): string {
  const env = options.env ?? process.env;
  if (options.dataDir) return resolve(options.dataDir);
  if (env.FLEXHELM_DATA_DIR) return resolve(env.FLEXHELM_DATA_DIR);
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  const xdg = env.XDG_CACHE_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'flexhelm');
  return join(homedir(), '.cache', 'flexhelm');
}
