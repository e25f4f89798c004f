import { describe, expect, it } from 'vitest';
import { rewriteUrl, urlRewritesFromEnv } from './url-rewrites.js';

describe('URL rewrites', () => {
  it('replaces the longest matching prefix only', () => {
    const rules = { 'https://a.org/': 'http://m/', 'https://a.org/deep/': 'http://n/' };
    expect(rewriteUrl('https://a.org/deep/x.csv', rules)).toBe('http://n/x.csv');
    expect(rewriteUrl('https://a.org/x.csv', rules)).toBe('http://m/x.csv');
    expect(rewriteUrl('https://b.org/x.csv', rules)).toBe('https://b.org/x.csv');
  });

  it('reads FLEXHELM_URL_REWRITES and explains bad values', () => {
    expect(urlRewritesFromEnv({})).toEqual({});
    expect(urlRewritesFromEnv({ FLEXHELM_URL_REWRITES: '{"https://a/":"http://b/"}' })).toEqual({ 'https://a/': 'http://b/' });
    expect(() => urlRewritesFromEnv({ FLEXHELM_URL_REWRITES: '{oops' })).toThrow(/not valid JSON/);
    expect(() => urlRewritesFromEnv({ FLEXHELM_URL_REWRITES: '["x"]' })).toThrow(/must be a JSON object/);
    expect(() => urlRewritesFromEnv({ FLEXHELM_URL_REWRITES: '{"https://a/": 3}' })).toThrow(/must be a JSON object/);
  });
});
