import { pyJsonDumps } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { requestResult, requestResultToPy, type RequestResult } from '@flexhelm/core';
import { resultFromStoreJson, resultToStoreJson } from './result-json.js';

const tricky: RequestResult = requestResult({
  success: true,
  completions: [
    {
      text: ' "quoted"\n\u00e9 NaN',
      logprob: -3.377086702000849,
      tokens: [
        { text: ' "quoted"', logprob: -0, top_logprobs: new Map([[' "quoted"', -0], ['NaN', -1e-300]]) },
        { text: '\n\u00e9', logprob: -Infinity, top_logprobs: new Map([['a', -1.5], ['b', NaN]]) },
      ],
      finish_reason: { reason: 'stop' },
    },
    { text: '', logprob: 0, tokens: [] },
  ],
  embedding: [0.25, Infinity],
  request_time: 0.1 + 0.2,
  batch_size: 8,
  batch_request_time: 1e21,
});

/** What the five files would hold for a result: its Python-JSON text, which keeps floats, -0.0 and NaN apart. */
const asWritten = (r: RequestResult) => pyJsonDumps(requestResultToPy(r));

describe('result store JSON', () => {
  it('round-trips every field exactly (NaN, ±Infinity, -0, top-logprob order, missing optional fields)', () => {
    const back = resultFromStoreJson(resultToStoreJson(tricky), 'test');
    expect(asWritten(back)).toBe(asWritten(tricky));
    expect(Object.is(back.completions[0]!.tokens[0]!.logprob, -0)).toBe(true);
    expect([...back.completions[0]!.tokens[1]!.top_logprobs.keys()]).toEqual(['a', 'b']);
    expect(back.completions[1]!.finish_reason).toBeUndefined();
    expect(back.request_datetime).toBeUndefined();
    expect(back).toEqual(tricky);
  });

  it('still reads the Python-JSON form earlier versions stored', () => {
    const old = asWritten(tricky);
    expect(asWritten(resultFromStoreJson(old, 'test'))).toBe(old);
  });
});
