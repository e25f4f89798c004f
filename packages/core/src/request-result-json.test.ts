import { pyJsonParse } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { helmJson } from './helm-json.js';
import { requestResultFromPy, requestResultToPy } from './request-result-json.js';
import { requestResult } from './request.js';

describe('requestResultToPy / requestResultFromPy', () => {
  const result = requestResult({
    success: true,
    completions: [
      {
        text: ' yes',
        logprob: 0,
        tokens: [{ text: ' yes', logprob: 0, top_logprobs: new Map([['1', -0.5], [' yes', 0]]) }],
        finish_reason: { reason: 'length' },
      },
    ],
    cached: false,
    request_time: 2,
    batch_size: 4,
  });

  it('writes float fields as Python floats', () => {
    const text = helmJson(requestResultToPy(result));
    expect(text).toContain('"logprob": 0.0');
    expect(text).toContain('"request_time": 2.0');
    expect(text).toContain('"batch_size": 4');
    // top_logprobs keeps its key order even for integer-like tokens
    expect(text.indexOf('"1": -0.5')).toBeLessThan(text.indexOf('" yes": 0.0'));
  });

  it('round-trips exactly', () => {
    const text = helmJson(requestResultToPy(result));
    const back = requestResultFromPy(pyJsonParse(text));
    expect(back).toEqual(result);
    expect(helmJson(requestResultToPy(back))).toBe(text);
  });

  it('names the broken field', () => {
    expect(() => requestResultFromPy(pyJsonParse('{"success": true, "completions": [{"text": 1}]}'))).toThrow(/completions\[0\]/);
  });
});
