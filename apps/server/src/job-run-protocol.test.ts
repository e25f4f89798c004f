import { request } from '@flexhelm/core';
import { PyFloat } from '@flexhelm/python-compat';
import { requestKey } from '@flexhelm/request-cache';
import { describe, expect, it } from 'vitest';
import { reviveRequest } from './job-run-protocol.js';

describe('reviveRequest', () => {
  it('gives a request posted between threads back its Python floats, so its cache key is the one it was built with', () => {
    const built = request({ prompt: 'Q: 1+1?\nA:', temperature: new PyFloat(0), top_p: new PyFloat(1), presence_penalty: 0, max_tokens: 5, stop_sequences: ['\n'] });
    const posted = structuredClone(built); // what a message between threads does
    expect(posted.temperature).not.toBeInstanceOf(PyFloat);
    expect(requestKey('m', posted)).not.toBe(requestKey('m', built)); // why reviving is needed
    const revived = reviveRequest(posted);
    expect(revived.temperature).toBeInstanceOf(PyFloat);
    expect(revived.presence_penalty).toBe(0); // a Python int stays an int
    expect(Object.keys(revived)).toEqual(Object.keys(built)); // the JSON's field order, which the key hashes
    expect(requestKey('m', revived)).toBe(requestKey('m', built));
  });
});
