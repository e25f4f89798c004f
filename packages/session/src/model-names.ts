import { join } from 'node:path';

/** HELM's name of a model given as `opt-1.3b` or `facebook/opt-1.3b`: a bare OPT name is Meta's (`facebook/`). */
export function helmModelName(model: string): string {
  return model.includes('/') ? model : `facebook/${model}`;
}

/** The request cache file of `model` in `folder`'s `cache/` (run, server) — the one naming rule for cache files. */
export function defaultCachePath(folder: string, model: string, subfolder = 'cache'): string {
  return join(folder, subfolder, `${model.replace(/[^\w.-]+/g, '_')}.sqlite`);
}
