import { describe, expect, it } from 'vitest';
import { jsonChunks, sseEvent } from './http-io.js';

describe('jsonChunks', () => {
  it('writes exactly JSON.stringify’s text, the named array one element per chunk', () => {
    const value = { id: 'cmpl-1', skipped: undefined, choices: [{ text: 'a"b', logprobs: null }, { text: 'ü😀', n: [1, 2] }], usage: { total_tokens: 3 } };
    const chunks = [...jsonChunks(value, 'choices')];
    expect(chunks.join('')).toBe(JSON.stringify(value));
    expect(chunks).toContain(`,${JSON.stringify(value.choices[1])}`);
    expect([...jsonChunks({ choices: [] }, 'choices')].join('')).toBe('{"choices":[]}');
    expect([...jsonChunks({}, 'choices')].join('')).toBe('{}');
  });

  it('frames server-sent events', () => {
    expect(sseEvent({ a: 1 })).toBe('data: {"a":1}\n\n');
    expect(sseEvent({ a: 1 }, 'end')).toBe('event: end\ndata: {"a":1}\n\n');
  });
});
