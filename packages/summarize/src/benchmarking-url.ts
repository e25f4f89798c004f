/** Python's `urllib.parse.quote(s, safe='')`: UTF-8, every byte but `A-Za-z0-9_.-~` percent-encoded (upper-case hex). */
function pyQuote(s: string): string {
  // encodeURIComponent leaves !'()* alone, which Python encodes; ~ is left alone by both.
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** HELM's `get_benchmarking_url(params)`: `"?" + urlencode(params, quote_via=quote)` (spaces as %20, not +). */
export function benchmarkingUrl(params: Record<string, string>): string {
  return `?${Object.entries(params).map(([k, v]) => `${pyQuote(k)}=${pyQuote(v)}`).join('&')}`;
}
