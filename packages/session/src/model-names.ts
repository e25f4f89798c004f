import { basename, join, resolve } from 'node:path';
import { isModelFolder } from '@flexhelm/runner';

/**
 * HELM's name of the model that ran: a Hub name as given (`meta-llama/Llama-3.2-1B`, so run names read
 * `model=meta-llama_Llama-3.2-1B`), a bare OPT name as Meta's (`facebook/opt-1.3b`), and a local folder as
 * `local/<folder name>` (characters other than letters, digits, `.`, `-`, `_` become `_`).
 */
export function helmModelName(model: string): string {
  if (isModelFolder(model)) return `local/${basename(resolve(model)).replace(/[^\w.-]+/g, '_')}`;
  return model.includes('/') ? model : `facebook/${model}`;
}

/** The request cache file of `model` in `folder`'s `cache/` (run, server) — the one naming rule for cache files. */
export function defaultCachePath(folder: string, model: string, subfolder = 'cache'): string {
  return join(folder, subfolder, `${model.replace(/[^\w.-]+/g, '_')}.sqlite`);
}
