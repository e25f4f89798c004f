import { z } from 'zod';

const rewritesSchema = z.record(z.string().min(1), z.string().min(1));

/** URL prefix → replacement, e.g. `{ "https://people.eecs.berkeley.edu/~hendrycks/": "http://mirror.local/mmlu/" }`. */
export type UrlRewrites = Readonly<Record<string, string>>;

/**
 * The rewrites in `$FLEXHELM_URL_REWRITES` (a JSON object of prefix → replacement), used to point downloads at a
 * mirror or a local test server. Empty when the variable is unset.
 */
export function urlRewritesFromEnv(env: NodeJS.ProcessEnv = process.env): UrlRewrites {
  const text = env.FLEXHELM_URL_REWRITES;
  if (!text?.trim()) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(
      `FLEXHELM_URL_REWRITES is not valid JSON (${(error as Error).message}); set it to an object such as {"https://example.org/data/": "http://127.0.0.1:8000/"}.`,
    );
  }
  const result = rewritesSchema.safeParse(parsed);
  if (!result.success) {
    throw new Error(
      `FLEXHELM_URL_REWRITES must be a JSON object mapping URL prefixes to replacement prefixes (both non-empty strings), e.g. {"https://example.org/data/": "http://127.0.0.1:8000/"}; got ${text}.`,
    );
  }
  return result.data;
}

/** `url` with its longest matching prefix replaced, or unchanged when no rule matches. */
export function rewriteUrl(url: string, rewrites: UrlRewrites): string {
  let best = '';
  for (const prefix of Object.keys(rewrites)) if (url.startsWith(prefix) && prefix.length > best.length) best = prefix;
  return best ? rewrites[best] + url.slice(best.length) : url;
}
