import { expect, it } from 'vitest';
import { benchmarkingUrl } from './benchmarking-url.js';

it("benchmarkingUrl encodes as urlencode(quote_via=quote) does: %20 for spaces, !'()* escaped, ~ kept", () => {
  // CPython 3.11: urlencode({'g': "a b/c!'()*~é", 'runSpecs': '["x"]'}, quote_via=quote)
  expect(benchmarkingUrl({ g: "a b/c!'()*~é", runSpecs: '["x"]' })).toBe('?g=a%20b%2Fc%21%27%28%29%2A~%C3%A9&runSpecs=%5B%22x%22%5D');
});
